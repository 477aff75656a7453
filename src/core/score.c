/*
 * score.c - node scoring strategies.
 *
 * Every strategy reads the node in place (usage through the cache's atomic
 * accessors) into a small stack view, never allocates, and returns a score
 * in [0, 100], higher is better. The policy layout is in score_int.h; the
 * YAML loader lives in policy.c.
 *
 * least-/most-allocated and balanced-allocation follow kube-scheduler's
 * NodeResourcesFit / NodeResourcesBalancedAllocation (integer arithmetic,
 * weighted mean, resources with zero allocatable skipped, extended
 * resources skipped when the pod does not ask for them, non-zero default
 * requests for cpu/memory of the pod). The whole-GPU resource is measured
 * per device in milli-GPU so that GPU shares count.
 */
#include "agentsched/core/score.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/hash.h"
#include "agentsched/core/gpu.h"
#include "agentsched/model/gpuannot.h"
#include "score_int.h"

#define MAX_NODE_SCORE 100
#define NONZERO_CPU    100                   /* kube-scheduler DefaultMilliCPURequest */
#define NONZERO_MEM    (200LL * 1024 * 1024) /* DefaultMemoryRequest */
#define MIB            (1024.0 * 1024.0)
#define FRAG_MEMO_SIZE 16384 /* power of two; score_fragment's memo */
/* 1 / the waste scale of score_fragment (a node's largest GPU, milli) */
#define PER_WASTE_SCALE (1.0 / (MODEL_MAX_GPUS * (double)MODEL_GPU_MILLI))

/* An entry of score_fragment's memo (see frag_memo_get): atomics only. */
struct frag_memo_ent {
    uint32_t seq;
    int32_t free_total; /* the waste's frag_parts */
    uint64_t id, ngen, tgen;
    double waste, frag, multi;
};

static const char *const strategy_names[SCORE__COUNT] = {
    "least-allocated", "most-allocated", "balanced-allocation", "best-fit", "fgd", "fragment",
};

/* See score.h. */
as_err score_strategy_parse(const char *name, score_strategy *out)
{
    if (!name)
        return AS_EINVAL;
    for (int i = 0; i < SCORE__COUNT; i++)
        if (strcmp(name, strategy_names[i]) == 0) {
            *out = (score_strategy)i;
            return AS_OK;
        }
    return AS_EINVAL;
}

/* See score.h. */
const char *score_strategy_name(score_strategy s)
{
    return (unsigned)s < SCORE__COUNT ? strategy_names[s] : "unknown";
}

/* ------------------------------------------------------------------ */
/* Policy construction                                                 */
/* ------------------------------------------------------------------ */

/* See score_int.h. */
as_err score_policy_set_weight(score_policy *p, const char *name, double weight, double unit)
{
    size_t n = strlen(name);
    if (n == 0 || n >= MODEL_RES_NAME_MAX)
        return AS_EINVAL;
    int i;
    for (i = 0; i < p->nw; i++)
        if (strcmp(p->w[i].name, name) == 0)
            break;
    if (i == p->nw) {
        if (p->nw == SCORE_MAX_WEIGHTS)
            return AS_ELIMIT;
        p->nw++;
        memcpy(p->w[i].name, name, n + 1);
        /* Fixed resources have fixed indexes; others resolve lazily. */
        p->w[i].idx = strcmp(name, "cpu") == 0                 ? MODEL_RES_CPU
                      : strcmp(name, "memory") == 0            ? MODEL_RES_MEMORY
                      : strcmp(name, "ephemeral-storage") == 0 ? MODEL_RES_EPHEMERAL
                      : strcmp(name, "pods") == 0              ? MODEL_RES_PODS
                                                               : -1;
    }
    p->w[i].weight = weight;
    p->w[i].unit = unit > 0 ? unit : 1;
    return AS_OK;
}

/* Default best-fit units: a core, 4 GiB, one GPU (milli), else 1. */
static double default_unit(const score_policy *p, const char *name)
{
    if (strcmp(name, "cpu") == 0)
        return 1000;
    if (strcmp(name, "memory") == 0)
        return 4.0 * 1024 * MIB;
    if (strcmp(name, p->gpu_name) == 0)
        return 1000;
    return 1;
}

/* See score_int.h. */
score_policy *score_policy_alloc(score_strategy s)
{
    score_policy *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->pool = pool_new(1 << 20);
    if (!p->pool) {
        free(p);
        return NULL;
    }
    p->refs = 1;
    p->strategy = s;
    strcpy(p->gpu_name, "nvidia.com/gpu");
    strcpy(p->gpu_share_name, "agentsched.io/gpu-milli");
    strcpy(p->gpu_model_label, "agentsched.io/gpu-model");
    p->gpu_annotations = GPUANNOT_AGENTSCHED;
    static const char *const sched[] = {"agent-scheduler"};
    p->agent_sched = (const char **)sched;
    p->nagent_sched = 1;
    p->soft_bonus = 50;
    p->ext_lo = 0;
    p->ext_hi = 100;
    p->ext_max = 10;
    p->candidates = 3;
    p->learn = true;
    p->pop_threshold = 0.95;
    p->f_strand = 1.0;
    p->f_frag = 1.0;
    p->f_pack = 0;
    p->f_spread = 0.05;
    p->f_spread_gpu = 0;
    p->f_surplus = true;
    p->f_multi = 0;
    p->f_mix = 0;
    p->f_spread_cpu = 0;
    p->f_reserve = 2;
    p->f_keep_free = 0.05;
    p->f_keep_frag = 0.1;
    p->f_fillable = 0.1;
    p->f_model = 0.5;
    p->f_cpu_gpu = 8000;
    p->f_mem_gpu = 32768;
    /* kube-scheduler's default resources, plus the GPU so shares count. */
    score_policy_set_weight(p, "cpu", 1, default_unit(p, "cpu"));
    score_policy_set_weight(p, "memory", 1, default_unit(p, "memory"));
    score_policy_set_weight(p, p->gpu_name, 1, default_unit(p, p->gpu_name));
    return p;
}

static uint64_t shape_hash(const score_shape *s)
{
    uint64_t h = 1469598103934665603ULL;
    uint64_t v[4] = {(uint64_t)s->cpu, (uint64_t)s->mem, s->gpu_count, s->gpu_milli};
    for (int i = 0; i < 4; i++) {
        h ^= v[i];
        h *= 1099511628211ULL;
        h ^= h >> 29;
    }
    return h;
}

/* slot_claim: a learned table's slot is empty (state 0), being written
 * (1) or ready (2). Claims an empty one (true: the caller fills it, then
 * stores 2 with release) or returns once it is ready (false), waiting
 * while another thread writes it (a few stores). */
static bool slot_claim(int *state)
{
    int st = __atomic_load_n(state, __ATOMIC_ACQUIRE);
    if (st == 0) {
        int expect = 0;
        if (__atomic_compare_exchange_n(state, &expect, 1, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            return true;
        st = expect;
    }
    while (st == 1)
        st = __atomic_load_n(state, __ATOMIC_ACQUIRE);
    return false;
}

/* Finds or claims the slot of shape s; NULL when the table is full. */
static score_shape_slot *shape_slot(score_policy *p, const score_shape *s)
{
    uint64_t h = shape_hash(s);
    for (int probe = 0; probe < SCORE_MAX_SHAPES; probe++) {
        score_shape_slot *sl = &p->slots[(h + (uint64_t)probe) % SCORE_MAX_SHAPES];
        if (slot_claim(&sl->state)) {
            sl->shape = *s;
            __atomic_store_n(&sl->state, 2, __ATOMIC_RELEASE);
            return sl;
        }
        if (memcmp(&sl->shape, s, sizeof *s) == 0)
            return sl;
    }
    return NULL;
}

/* See score_int.h. */
as_err score_policy_add_shape(score_policy *p, const score_shape *s, double pop)
{
    score_shape_slot *sl = shape_slot(p, s);
    if (!sl)
        return AS_ELIMIT;
    uint64_t c = (uint64_t)llround(pop * 1e6);
    __atomic_add_fetch(&sl->count, c ? c : 1, __ATOMIC_RELAXED);
    return AS_OK;
}

/* pod_models writes the GPU models pod is pinned to as "|A|B|" into key:
 * the policy's model label in its nodeSelector, or In on that label in
 * every term of its required node affinity (the union). False when pod is
 * not pinned that way or the list does not fit. */
static bool pod_models(const score_policy *p, const model_pod *pod, char *key, size_t cap)
{
    const char *label = p->gpu_model_label;
    const char *v = model_labels_get(&pod->node_selector, label);
    if (v)
        return (size_t)snprintf(key, cap, "|%s|", v) < cap;
    if (!pod->affinity.present || !pod->affinity.nterms)
        return false;
    size_t n = (size_t)snprintf(key, cap, "|");
    for (uint32_t t = 0; t < pod->affinity.nterms; t++) {
        const model_selector_term *term = &pod->affinity.terms[t];
        bool named = false;
        for (uint32_t e = 0; e < term->nexprs && !named; e++) {
            const model_selector_req *r = &term->exprs[e];
            if (r->op != MODEL_SEL_IN || strcmp(r->key, label) != 0)
                continue;
            named = true;
            for (uint32_t i = 0; i < r->nvalues; i++) {
                n += (size_t)snprintf(key + n, cap - n, "%s|", r->values[i]);
                if (n >= cap)
                    return false;
            }
        }
        if (!named)
            return false; /* a term any model satisfies */
    }
    return n > 1;
}

/* Finds or claims the slot of pin set key; NULL when the table is full. */
static score_pin_slot *pin_slot(score_policy *p, const char *key)
{
    uint64_t h = hash_bytes(key, strlen(key));
    for (int probe = 0; probe < SCORE_PIN_SETS; probe++) {
        score_pin_slot *sl = &p->pins[(h + (uint64_t)probe) % SCORE_PIN_SETS];
        if (slot_claim(&sl->state)) {
            snprintf(sl->key, sizeof sl->key, "%s", key);
            __atomic_store_n(&sl->state, 2, __ATOMIC_RELEASE);
            return sl;
        }
        if (strcmp(sl->key, key) == 0)
            return sl;
    }
    return NULL;
}

/* Relaxed atomic double load / store for the derived tables. */
static double ld(const double *x)
{
    double v;
    __atomic_load(x, &v, __ATOMIC_RELAXED);
    return v;
}

static void st(double *x, double v)
{
    __atomic_store(x, &v, __ATOMIC_RELAXED);
}

/* Rebuilds fragment's table from the learned aggregates (policy priors
 * until ten GPUs' worth of pods were seen). */
static void rebuild_fragment(score_policy *p)
{
    uint64_t milli = __atomic_load_n(&p->gpu_milli_sum, __ATOMIC_RELAXED);
    uint64_t cpu = __atomic_load_n(&p->gpu_cpu_sum, __ATOMIC_RELAXED);
    uint64_t mem = __atomic_load_n(&p->gpu_mem_mib_sum, __ATOMIC_RELAXED);
    if (milli >= 10 * MODEL_GPU_MILLI) {
        st(&p->t_cpu_per_milli, (double)cpu / (double)milli);
        st(&p->t_mem_per_milli, (double)mem * MIB / (double)milli);
    } else {
        st(&p->t_cpu_per_milli, p->f_cpu_gpu / MODEL_GPU_MILLI);
        st(&p->t_mem_per_milli, p->f_mem_gpu * MIB / MODEL_GPU_MILLI);
    }
    st(&p->t_milli_per_cpu, 1.0 / ld(&p->t_cpu_per_milli));
    st(&p->t_milli_per_mem, 1.0 / ld(&p->t_mem_per_milli));
    uint64_t h[SCORE_HIST_BUCKETS], tot = 0;
    for (int b = 0; b < SCORE_HIST_BUCKETS; b++) {
        h[b] = __atomic_load_n(&p->hist[b], __ATOMIC_RELAXED);
        tot += h[b];
    }
    /* Without observations assume half of the demands miss a partial GPU. */
    double acc = 0;
    for (int b = SCORE_HIST_BUCKETS - 1; b >= 0; b--) {
        st(&p->t_p_above[b], tot ? acc / (double)tot : 0.5);
        acc += (double)h[b];
    }
    /* What a share's remainder holds: buckets 0..19 are the shares'
     * demands (20 the whole GPUs'). */
    uint64_t shares = 0;
    for (int b = 0; b < SCORE_HIST_BUCKETS - 1; b++)
        shares += h[b];
    acc = 0;
    for (int b = 0; b < SCORE_HIST_BUCKETS; b++) {
        acc += b < SCORE_HIST_BUCKETS - 1 ? (double)h[b] : 0;
        st(&p->t_fill[b], shares >= 20 ? acc / (double)shares : 1.0);
    }
    /* GPU waste only matters as much as GPU pods come: a stream of
     * CPU-only agent pods should not keep GPU nodes' CPU idle. */
    uint64_t gp = __atomic_load_n(&p->gpu_pods, __ATOMIC_RELAXED);
    uint64_t cp = __atomic_load_n(&p->cpu_pods, __ATOMIC_RELAXED);
    st(&p->t_gpu_share, gp + cp >= 20 ? (double)gp / (double)(gp + cp) : 1.0);
    /* reserve keeps CPU beside free GPUs as much as GPU pods come, all of
     * their need once they are half the pods (at the default 2); not on
     * the priors: a guessed ratio must not turn pods away. */
    double keep = gp + cp >= 20 && milli >= 10 * MODEL_GPU_MILLI
                      ? p->f_reserve * (double)gp / (double)(gp + cp)
                      : 0.0;
    st(&p->t_reserve, keep > 1 ? 1.0 : keep);
    /* spreadCpu's blend from c, the share of the CPU demand that CPU-only
     * pods ask for (none until 20 pods were seen): its excess over the
     * GPU pods' share, 2c - 1, times the weight, within [0, 1]. */
    uint64_t oc = __atomic_load_n(&p->cpu_only_cpu_sum, __ATOMIC_RELAXED);
    double oshare = gp + cp >= 20 && oc + cpu > 0 ? (double)oc / (double)(oc + cpu) : 0.0;
    double blend = p->f_spread_cpu * (2.0 * oshare - 1.0);
    st(&p->t_cpu_blend, blend < 0 ? 0.0 : blend > 1 ? 1.0 : blend);
    uint64_t kh[MODEL_MAX_GPUS + 1], ktot = 0;
    for (int k = 0; k <= MODEL_MAX_GPUS; k++) {
        kh[k] = __atomic_load_n(&p->khist[k], __ATOMIC_RELAXED);
        ktot += kh[k];
    }
    acc = 0;
    for (int k = MODEL_MAX_GPUS; k >= 0; k--) {
        st(&p->t_k_above[k], ktot ? acc / (double)ktot : 0);
        acc += (double)kh[k];
    }
    /* CPU-per-GPU classes, weighted by their GPU demand; the prior as one
     * class until the mean above is learned. */
    double rp[SCORE_RATIO_CLASSES], ra[SCORE_RATIO_CLASSES];
    int nrc = 0;
    if (milli >= 10 * MODEL_GPU_MILLI) {
        for (int c = 0; c < SCORE_RATIO_CLASSES; c++) {
            uint64_t m = __atomic_load_n(&p->rc_milli[c], __ATOMIC_RELAXED);
            if (!m)
                continue;
            uint64_t rc = __atomic_load_n(&p->rc_cpu[c], __ATOMIC_RELAXED);
            rp[nrc] = (double)m / (double)milli;
            ra[nrc] = (double)m / (double)(rc ? rc : 1);
            nrc++;
        }
    }
    if (nrc == 0) {
        rp[0] = 1.0;
        ra[0] = 1.0 / ld(&p->t_cpu_per_milli);
        nrc = 1;
    }
    double pre = 0, suf = 0;
    for (int c = nrc; c < SCORE_RATIO_CLASSES; c++)
        st(&p->t_rc_icpu[c], -1);
    for (int c = 0; c < nrc; c++) {
        st(&p->t_rc_icpu[c], ra[c]);
        st(&p->t_rc_ppre[c], pre);
        pre += rp[c];
    }
    st(&p->t_rc_ppre[nrc], 1.0);
    st(&p->t_rc_asuf[nrc], 0);
    for (int c = nrc - 1; c >= 0; c--) {
        suf += rp[c] * ra[c];
        st(&p->t_rc_asuf[c], suf);
    }
    __atomic_store_n(&p->t_nrc, nrc, __ATOMIC_RELAXED);
    /* Pinned demand per model: the share of the GPU demand pinned to a
     * set that holds the model (a set's demand counts for each of its
     * models). Models are appended in the order first named. */
    int npm = p->t_npm;
    double pm[SCORE_PIN_MODELS] = {0};
    for (int i = 0; i < SCORE_PIN_SETS; i++) {
        const score_pin_slot *sl = &p->pins[i];
        if (__atomic_load_n(&sl->state, __ATOMIC_ACQUIRE) != 2)
            continue;
        uint64_t m = __atomic_load_n(&sl->milli, __ATOMIC_RELAXED);
        for (const char *a = sl->key + 1; *a; a = strchr(a, '|') + 1) {
            size_t len = strcspn(a, "|");
            int k = 0;
            while (k < npm && !(strncmp(p->t_pm_name[k], a, len) == 0 && !p->t_pm_name[k][len]))
                k++;
            if (k == npm) {
                if (npm == SCORE_PIN_MODELS || len >= SCORE_MODEL_NAME)
                    continue;
                memcpy(p->t_pm_name[k], a, len);
                p->t_pm_name[k][len] = 0;
                npm++;
            }
            pm[k] += (double)m;
        }
    }
    for (int k = 0; k < npm; k++)
        st(&p->t_pm_share[k], milli ? pm[k] / (double)milli : 0);
    __atomic_store_n(&p->t_npm, npm, __ATOMIC_RELEASE);
}

typedef struct typ_tmp {
    score_shape s;
    uint64_t c;
} typ_tmp;

static int typ_cmp(const void *a, const void *b)
{
    const typ_tmp *x = a, *y = b;
    if (x->c != y->c)
        return x->c > y->c ? -1 : 1;
    return memcmp(&x->s, &y->s, sizeof x->s);
}

static void close_class(score_policy *p, int c, int end, double pop, int64_t max_cpu,
                        int64_t max_mem)
{
    __atomic_store_n(&p->cls_end[c], end, __ATOMIC_RELAXED);
    __atomic_store(&p->cls_pop[c], &pop, __ATOMIC_RELAXED);
    __atomic_store_n(&p->cls_max_cpu[c], max_cpu, __ATOMIC_RELAXED);
    __atomic_store_n(&p->cls_max_mem[c], max_mem, __ATOMIC_RELAXED);
}

static int typ_class_cmp(const void *a, const void *b)
{
    const typ_tmp *x = a, *y = b;
    if (x->s.gpu_count != y->s.gpu_count)
        return x->s.gpu_count < y->s.gpu_count ? -1 : 1;
    if (x->s.gpu_milli != y->s.gpu_milli)
        return x->s.gpu_milli < y->s.gpu_milli ? -1 : 1;
    return typ_cmp(a, b);
}

/* What scoring reads from the learned tables, per strategy, so a rebuild
 * that only recounts popularity the strategy ignores (or that reproduces
 * the same values) keeps the generation. Read by the rebuilder only (the
 * sole writer, under p->rebuilding), so plain reads are race-free. */
typedef struct table_sig {
    int ntyp, ncls;
    score_typical typ[SCORE_MAX_TYPICAL];
    uint32_t cls_cnt[SCORE_MAX_TYPICAL], cls_milli[SCORE_MAX_TYPICAL];
    int cls_first[SCORE_MAX_TYPICAL], cls_end[SCORE_MAX_TYPICAL];
    double cls_pop[SCORE_MAX_TYPICAL];
    int64_t cls_max_cpu[SCORE_MAX_TYPICAL], cls_max_mem[SCORE_MAX_TYPICAL];
    double t_cpu_per_milli, t_mem_per_milli, t_gpu_share, t_cpu_blend, t_reserve;
    double t_p_above[SCORE_HIST_BUCKETS];
    bool fillable[SCORE_HIST_BUCKETS]; /* keepFree reads t_fill only against fillable */
    double t_k_above[MODEL_MAX_GPUS + 1];
    int t_nrc;
    double t_rc_icpu[SCORE_RATIO_CLASSES];
    double t_rc_ppre[SCORE_RATIO_CLASSES + 1], t_rc_asuf[SCORE_RATIO_CLASSES + 1];
    int t_npm;
    double t_pm_share[SCORE_PIN_MODELS];
} table_sig;

static void table_sig_take(const score_policy *p, table_sig *g)
{
    memset(g, 0, sizeof *g);
    if (p->strategy == SCORE_FGD) {
        g->ntyp = p->ntyp;
        g->ncls = p->ncls;
        memcpy(g->typ, p->typ, (size_t)g->ntyp * sizeof g->typ[0]);
        for (int c = 0; c < g->ncls; c++) {
            g->cls_cnt[c] = p->cls_cnt[c];
            g->cls_milli[c] = p->cls_milli[c];
            g->cls_first[c] = p->cls_first[c];
            g->cls_end[c] = p->cls_end[c];
            g->cls_pop[c] = p->cls_pop[c];
            g->cls_max_cpu[c] = p->cls_max_cpu[c];
            g->cls_max_mem[c] = p->cls_max_mem[c];
        }
    } else if (p->strategy == SCORE_FRAGMENT) {
        g->t_cpu_per_milli = p->t_cpu_per_milli;
        g->t_mem_per_milli = p->t_mem_per_milli;
        g->t_gpu_share = p->t_gpu_share;
        g->t_cpu_blend = p->t_cpu_blend;
        g->t_reserve = p->t_reserve;
        memcpy(g->t_p_above, p->t_p_above, sizeof g->t_p_above);
        if (p->f_keep_free > 0)
            for (int b = 0; b < SCORE_HIST_BUCKETS; b++)
                g->fillable[b] = p->t_fill[b] >= p->f_fillable;
        if (p->f_multi > 0)
            memcpy(g->t_k_above, p->t_k_above, sizeof g->t_k_above);
        if (p->f_mix > 0) {
            g->t_nrc = p->t_nrc;
            memcpy(g->t_rc_icpu, p->t_rc_icpu, sizeof g->t_rc_icpu);
            memcpy(g->t_rc_ppre, p->t_rc_ppre, sizeof g->t_rc_ppre);
            memcpy(g->t_rc_asuf, p->t_rc_asuf, sizeof g->t_rc_asuf);
        }
        if (p->f_model > 0) {
            g->t_npm = p->t_npm;
            memcpy(g->t_pm_share, p->t_pm_share, sizeof g->t_pm_share);
        }
    }
}

/* Rebuilds the derived tables: fgd's typical shapes (the most popular
 * until they cover pop_threshold of all observations, at most
 * SCORE_MAX_TYPICAL) and fragment's ratios and demand distributions. */
static void rebuild_tables(score_policy *p)
{
    if (__atomic_exchange_n(&p->rebuilding, 1, __ATOMIC_ACQUIRE))
        return; /* someone else is at it */
    table_sig before, after;
    table_sig_take(p, &before);
    typ_tmp t[SCORE_MAX_SHAPES];
    size_t n = 0;
    uint64_t total = 0;
    for (int i = 0; i < SCORE_MAX_SHAPES; i++) {
        score_shape_slot *sl = &p->slots[i];
        if (__atomic_load_n(&sl->state, __ATOMIC_ACQUIRE) != 2)
            continue;
        uint64_t c = __atomic_load_n(&sl->count, __ATOMIC_RELAXED);
        if (!c)
            continue;
        t[n].s = sl->shape;
        t[n].c = c;
        total += c;
        n++;
    }
    qsort(t, n, sizeof t[0], typ_cmp);
    uint64_t covered = 0, kept_total = 0;
    size_t k = 0;
    while (k < n && k < SCORE_MAX_TYPICAL &&
           (k == 0 || (double)covered < p->pop_threshold * (double)total)) {
        covered += t[k].c;
        k++;
    }
    kept_total = covered;
    /* Group the kept shapes by GPU demand so fgd computes each device
     * fragment once per class. */
    qsort(t, k, sizeof t[0], typ_class_cmp);
    int ncls = 0;
    double cpop = 0;
    int64_t cmax_cpu = 0, cmax_mem = 0;
    for (size_t i = 0; i < k; i++) {
        score_typical *ty = &p->typ[i];
        double pop = (double)t[i].c / (double)kept_total;
        if (ncls == 0 || p->cls_cnt[ncls - 1] != t[i].s.gpu_count ||
            p->cls_milli[ncls - 1] != t[i].s.gpu_milli) {
            if (ncls > 0)
                close_class(p, ncls - 1, (int)i, cpop, cmax_cpu, cmax_mem);
            __atomic_store_n(&p->cls_cnt[ncls], t[i].s.gpu_count, __ATOMIC_RELAXED);
            __atomic_store_n(&p->cls_milli[ncls], t[i].s.gpu_milli, __ATOMIC_RELAXED);
            __atomic_store_n(&p->cls_first[ncls], (int)i, __ATOMIC_RELAXED);
            ncls++;
            cpop = 0;
            cmax_cpu = cmax_mem = 0;
        }
        cpop += pop;
        if (t[i].s.cpu > cmax_cpu)
            cmax_cpu = t[i].s.cpu;
        if (t[i].s.mem > cmax_mem)
            cmax_mem = t[i].s.mem;
        __atomic_store_n(&ty->cls, ncls - 1, __ATOMIC_RELAXED);
        __atomic_store_n(&ty->cpu, t[i].s.cpu, __ATOMIC_RELAXED);
        __atomic_store_n(&ty->mem, t[i].s.mem, __ATOMIC_RELAXED);
        __atomic_store_n(&ty->gpu_count, t[i].s.gpu_count, __ATOMIC_RELAXED);
        __atomic_store_n(&ty->gpu_milli, t[i].s.gpu_milli, __ATOMIC_RELAXED);
        __atomic_store(&ty->pop, &pop, __ATOMIC_RELAXED);
    }
    if (ncls > 0)
        close_class(p, ncls - 1, (int)k, cpop, cmax_cpu, cmax_mem);
    __atomic_store_n(&p->ncls, ncls, __ATOMIC_RELAXED);
    __atomic_store_n(&p->ntyp, (int)k, __ATOMIC_RELEASE);
    rebuild_fragment(p);
    table_sig_take(p, &after);
    if (memcmp(&before, &after, sizeof before) != 0)
        __atomic_add_fetch(&p->gen, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&p->rebuilding, 0, __ATOMIC_RELEASE);
}

/* See score_int.h. */
void score_policy_finish(score_policy *p)
{
    if (p->strategy == SCORE_FRAGMENT && !p->memo)
        p->memo = calloc(FRAG_MEMO_SIZE, sizeof *p->memo); /* NULL: no memo, same scores */
    for (int i = 0; i < p->nw; i++)
        p->w[i].gpu = strcmp(p->w[i].name, p->gpu_name) == 0;
    rebuild_tables(p);
}

/* See score.h. */
as_err score_policy_new_strategy(model_registry *reg, score_strategy s, score_policy **out)
{
    if ((unsigned)s >= SCORE__COUNT)
        return AS_EINVAL;
    score_policy *p = score_policy_alloc(s);
    if (!p)
        return AS_ENOMEM;
    p->reg = reg;
    score_policy_finish(p);
    *out = p;
    return AS_OK;
}

/* See score.h. */
as_err score_policy_new_default(model_registry *reg, score_policy **out)
{
    return score_policy_new_strategy(reg, SCORE_FRAGMENT, out);
}

/* See score.h. */
score_policy *score_policy_ref(score_policy *p)
{
    __atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
    return p;
}

/* See score.h. */
void score_policy_unref(score_policy *p)
{
    if (p && __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        pool_free(p->pool);
        free(p->memo);
        free(p);
    }
}

/* See score.h. */
uint64_t score_policy_generation(const score_policy *p)
{
    return __atomic_load_n(&p->gen, __ATOMIC_ACQUIRE);
}

/* See score.h. */
score_strategy score_policy_strategy(const score_policy *p)
{
    return p->strategy;
}

/* See score.h. */
bool score_policy_is_agent_pod(const score_policy *p, const model_pod *pod)
{
    if (pod->scheduler_name)
        for (size_t i = 0; i < p->nagent_sched; i++)
            if (strcmp(pod->scheduler_name, p->agent_sched[i]) == 0)
                return true;
    if (p->nagent_labels == 0)
        return false;
    for (size_t i = 0; i < p->nagent_labels; i++) {
        const char *v = model_labels_get(&pod->labels, p->agent_labels[i].key);
        if (!v || strcmp(v, p->agent_labels[i].value) != 0)
            return false;
    }
    return true;
}

/* See score.h. */
double score_policy_soft_shard_bonus(const score_policy *p)
{
    return p->soft_bonus;
}

/* See score.h. */
uint32_t score_policy_extender_shortlist(const score_policy *p)
{
    return p->ext_shortlist;
}

/* See score.h. */
void score_policy_gpu_names(const score_policy *p, const char **gpu_name, const char **share_name,
                            const char **model_label)
{
    *gpu_name = p->gpu_name;
    *share_name = p->gpu_share_name;
    *model_label = p->gpu_model_label;
}

/* See score.h. */
uint32_t score_policy_gpu_annotations(const score_policy *p)
{
    return p->gpu_annotations;
}

/* See score.h. */
uint32_t score_policy_candidates(const score_policy *p)
{
    return p->candidates;
}

/* See score.h. */
double score_policy_min_score(const score_policy *p)
{
    return p->min_score;
}

/* score_scale is score_to_extender's body, inline for the batch; it takes
 * the policy's fields as values so that a loop storing int8_t results
 * (which may alias anything) need not reload them for every node. */
static inline int score_scale(double lo, double hi, int max, bool floor_, double score)
{
    double span = hi - lo;
    double x = span > 0 ? (score - lo) / span : 0;
    if (!(x >= 0)) /* NaN too */
        x = 0;
    if (x > 1)
        x = 1;
    x *= max;
    /* x >= 0, so truncation is floor (without SSE4.1 floor() is a libm
     * call, once per node in every prioritize) */
    int s = floor_ ? (int)x : (int)(x + 0.5);
    return s < 0 ? 0 : s > max ? max : s;
}

/* See score.h. */
void score_to_extender_n(const score_policy *p, const double *score, size_t n, int8_t *out)
{
    const double lo = p->ext_lo, hi = p->ext_hi;
    const int max = p->ext_max;
    const bool fl = p->ext_floor;
    /* Identical nodes score alike, so a run of one score is scaled once
     * (the division is most of the cost; the result is the same). */
    double last = -1;
    int8_t last_out = 0;
    for (size_t i = 0; i < n; i++) {
        if (score[i] < 0) {
            out[i] = 0;
            continue;
        }
        if (score[i] != last) {
            last = score[i];
            last_out = (int8_t)score_scale(lo, hi, max, fl, last);
        }
        out[i] = last_out;
    }
}

/* See score.h. */
int score_to_extender(const score_policy *p, double score)
{
    return score_scale(p->ext_lo, p->ext_hi, p->ext_max, p->ext_floor, score);
}

/* ------------------------------------------------------------------ */
/* Learning                                                            */
/* ------------------------------------------------------------------ */

static int64_t pod_cpu(const model_pod *pod)
{
    return pod->req.v[MODEL_RES_CPU];
}

static int64_t pod_mem(const model_pod *pod)
{
    return pod->req.v[MODEL_RES_MEMORY];
}

/* See score.h. */
void score_observe_pod(score_policy *p, const model_pod *pod)
{
    if (!p->learn)
        return;
    score_shape s = {pod_cpu(pod), pod_mem(pod), pod->gpu_count,
                     pod->gpu_count ? pod->gpu_milli : 0};
    score_shape_slot *sl = shape_slot(p, &s);
    if (sl)
        __atomic_add_fetch(&sl->count, 1, __ATOMIC_RELAXED);
    if (pod->gpu_count) {
        uint64_t milli = (uint64_t)pod->gpu_count * pod->gpu_milli;
        __atomic_add_fetch(&p->gpu_pods, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&p->gpu_milli_sum, milli, __ATOMIC_RELAXED);
        __atomic_add_fetch(&p->gpu_cpu_sum, (uint64_t)(s.cpu > 0 ? s.cpu : 0), __ATOMIC_RELAXED);
        __atomic_add_fetch(&p->gpu_mem_mib_sum, (uint64_t)(s.mem > 0 ? s.mem : 0) >> 20,
                           __ATOMIC_RELAXED);
        uint32_t d = pod->gpu_milli > MODEL_GPU_MILLI ? MODEL_GPU_MILLI : pod->gpu_milli;
        __atomic_add_fetch(&p->hist[d / 50], pod->gpu_count, __ATOMIC_RELAXED);
        /* Fully free devices needed: none for a share. */
        uint32_t k = pod->gpu_milli < MODEL_GPU_MILLI  ? 0
                     : pod->gpu_count > MODEL_MAX_GPUS ? MODEL_MAX_GPUS
                                                       : pod->gpu_count;
        __atomic_add_fetch(&p->khist[k], 1, __ATOMIC_RELAXED);
        /* CPU-per-GPU class: below one core per GPU, then doubling. */
        uint64_t per = milli ? (uint64_t)(s.cpu > 0 ? s.cpu : 0) * MODEL_GPU_MILLI / milli : 0;
        int c = 0;
        for (uint64_t lim = 1000; per >= lim && c < SCORE_RATIO_CLASSES - 1; lim *= 4)
            c++;
        __atomic_add_fetch(&p->rc_milli[c], milli, __ATOMIC_RELAXED);
        __atomic_add_fetch(&p->rc_cpu[c], (uint64_t)(s.cpu > 0 ? s.cpu : 0), __ATOMIC_RELAXED);
        char key[SCORE_PIN_KEY];
        score_pin_slot *pin;
        if (p->f_model > 0 && pod_models(p, pod, key, sizeof key) && (pin = pin_slot(p, key)))
            __atomic_add_fetch(&pin->milli, milli, __ATOMIC_RELAXED);
    } else {
        __atomic_add_fetch(&p->cpu_pods, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&p->cpu_only_cpu_sum, (uint64_t)(s.cpu > 0 ? s.cpu : 0),
                           __ATOMIC_RELAXED);
    }
    /* Rebuild the typical table often while little is known, then rarely:
     * popularity converges and the rebuild is O(slots log slots). */
    uint64_t n = __atomic_add_fetch(&p->observed, 1, __ATOMIC_RELAXED);
    if (n <= 64 || (n & 63) == 0)
        rebuild_tables(p);
}

/* ------------------------------------------------------------------ */
/* Node view                                                           */
/* ------------------------------------------------------------------ */

/* a - b saturating at the int64 range (hostile requests must not
 * overflow). */
static int64_t sat_sub(int64_t a, int64_t b)
{
    if (b > 0 && a < INT64_MIN + b)
        return INT64_MIN;
    if (b < 0 && a > INT64_MAX + b)
        return INT64_MAX;
    return a - b;
}

typedef struct view {
    int64_t cpu_alloc, mem_alloc;
    int64_t cpu_free, mem_free;
    int ngpu;
    int32_t f[MODEL_MAX_GPUS]; /* free milli per device */
} view;

/*
 * hot_alloc returns the node's allocatable vector and device count from
 * the cache_node's hot copies of its spec (cache.h), so a scan never
 * chases the spec pointer (a cache miss per node). A cache_node built by
 * hand with only `spec` set (tests, tools) has an all-zero copy; its pods
 * allocatable is then 0 and the spec is read instead. A cache-held node
 * whose spec really has pods 0 reads the same values either way.
 */
static inline const model_resvec *hot_alloc(const cache_node *node, int *ngpus)
{
    if (node->alloc.v[MODEL_RES_PODS] != 0 || !node->spec) {
        *ngpus = (int)(node->ngpus > MODEL_MAX_GPUS ? MODEL_MAX_GPUS : node->ngpus);
        return &node->alloc;
    }
    *ngpus = (int)(node->spec->ngpus > MODEL_MAX_GPUS ? MODEL_MAX_GPUS : node->spec->ngpus);
    return &node->spec->alloc;
}

/* view_load_cpu fills a view's CPU, memory and device count;
 * view_load_devices its devices' free milli; view_load both. */
static inline void view_load_cpu(view *v, const cache_node *node)
{
    const model_resvec *alloc = hot_alloc(node, &v->ngpu);
    v->cpu_alloc = alloc->v[MODEL_RES_CPU];
    v->mem_alloc = alloc->v[MODEL_RES_MEMORY];
    v->cpu_free = v->cpu_alloc - cache_node_requested(node, MODEL_RES_CPU);
    v->mem_free = v->mem_alloc - cache_node_requested(node, MODEL_RES_MEMORY);
}

static inline void view_load_devices(view *v, const cache_node *node)
{
    for (int i = 0; i < v->ngpu; i++)
        v->f[i] = MODEL_GPU_MILLI - cache_node_gpu_used(node, i);
}

static void view_load(view *v, const cache_node *node)
{
    view_load_cpu(v, node);
    view_load_devices(v, node);
}

/* view_share_device: the device a share of milli takes in the view, as
 * pred_gpu_choose picks it (the least free milli that holds it); -1 when
 * none does. */
static int view_share_device(const view *v, int32_t milli)
{
    int best = -1;
    for (int i = 0; i < v->ngpu; i++)
        if (v->f[i] >= milli && (best < 0 || v->f[i] < v->f[best]))
            best = i;
    return best;
}

/* Applies pod to the view the way pred_gpu_choose places it: whole GPUs on
 * fully free devices (lowest index first), a share on the device with the
 * least free milli that holds it. Returns false if the GPUs do not fit. */
static bool view_place(view *v, const model_pod *pod)
{
    v->cpu_free = sat_sub(v->cpu_free, pod_cpu(pod));
    v->mem_free = sat_sub(v->mem_free, pod_mem(pod));
    if (!pod->gpu_count)
        return true;
    if (pod->gpu_milli >= MODEL_GPU_MILLI) {
        uint32_t need = pod->gpu_count;
        for (int i = 0; i < v->ngpu && need; i++)
            if (v->f[i] >= MODEL_GPU_MILLI) {
                v->f[i] = 0;
                need--;
            }
        return need == 0;
    }
    int best = view_share_device(v, (int32_t)pod->gpu_milli);
    if (best < 0)
        return false;
    v->f[best] -= (int32_t)pod->gpu_milli;
    return true;
}

typedef struct gpu_sum {
    int64_t total; /* free milli over all devices */
    int nfull;     /* fully free devices */
    int32_t max;   /* largest free on one device */
} gpu_sum;

static gpu_sum view_gpu(const view *v)
{
    gpu_sum g = {0, 0, 0};
    for (int i = 0; i < v->ngpu; i++) {
        int32_t f = v->f[i] < 0 ? 0 : v->f[i];
        g.total += f;
        g.nfull += f >= MODEL_GPU_MILLI;
        if (f > g.max)
            g.max = f;
    }
    return g;
}

/* Resolves the registry index of weight w (or -1 while nobody has it). */
static int weight_index(const score_weight *w, const model_registry *reg)
{
    int idx = __atomic_load_n(&((score_weight *)w)->idx, __ATOMIC_RELAXED);
    if (idx >= 0)
        return idx;
    if (!reg)
        return -1;
    idx = model_registry_lookup(reg, w->name, strlen(w->name));
    if (idx >= 0)
        __atomic_store_n(&((score_weight *)w)->idx, idx, __ATOMIC_RELAXED);
    return idx;
}

/* Allocatable, node requested (before the pod) and pod request of weight w,
 * kube-scheduler style. Returns false when the resource is skipped. */
static bool weight_amounts(const score_policy *p, const score_weight *w, const model_pod *pod,
                           const cache_node *node, const model_registry *reg, int64_t *alloc,
                           int64_t *req, int64_t *podreq, bool nonzero)
{
    int n;
    const model_resvec *nalloc = hot_alloc(node, &n);
    if (w->gpu) {
        *podreq = (int64_t)pod->gpu_count * pod->gpu_milli;
        if (*podreq == 0 || n == 0)
            return false; /* an extended resource the pod does not use */
        int64_t used = 0;
        for (int i = 0; i < n; i++)
            used += cache_node_gpu_used(node, i);
        *alloc = (int64_t)n * MODEL_GPU_MILLI;
        *req = used;
        return true;
    }
    int r = weight_index(w, reg);
    if (r < 0)
        return false;
    *alloc = nalloc->v[r];
    *req = cache_node_requested(node, r);
    *podreq = pod->req.v[r];
    if (nonzero && r == MODEL_RES_CPU && *podreq == 0)
        *podreq = NONZERO_CPU;
    else if (nonzero && r == MODEL_RES_MEMORY && *podreq == 0)
        *podreq = NONZERO_MEM;
    else if (r >= MODEL_RES_FIRST_EXTENDED && *podreq == 0)
        return false;
    return *alloc != 0;
}

/* ------------------------------------------------------------------ */
/* kube-scheduler strategies                                           */
/* ------------------------------------------------------------------ */

static const model_registry *policy_reg(const score_policy *p, const cache_node *node)
{
    (void)node;
    return p->reg;
}

/* a + b without signed overflow (usage and requests are non-negative). */
static int64_t sat_add(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b)
        return INT64_MAX;
    return a + b;
}

/* num * 100 / den in integers as upstream, without overflow for huge
 * quantities (0 <= num <= den). */
static int64_t pct(int64_t num, int64_t den)
{
    if (num <= INT64_MAX / MAX_NODE_SCORE)
        return num * MAX_NODE_SCORE / den;
    return (int64_t)((double)num / (double)den * MAX_NODE_SCORE);
}

static double score_allocated(const score_policy *p, const model_pod *pod, const cache_node *node,
                              const model_registry *reg, bool most)
{
    /* Integer per-resource scores as upstream; the weighted mean is
     * truncated like upstream's int64 division (exact for integer weights,
     * and policies may also give fractional ones). */
    double sum = 0, wsum = 0;
    for (int i = 0; i < p->nw; i++) {
        const score_weight *w = &p->w[i];
        int64_t alloc, req, podreq;
        if (w->weight <= 0 || !weight_amounts(p, w, pod, node, reg, &alloc, &req, &podreq, true))
            continue;
        int64_t used = sat_add(req, podreq);
        int64_t s;
        if (most) {
            if (used > alloc)
                used = alloc;
            s = pct(used, alloc);
        } else {
            s = used > alloc ? 0 : pct(alloc - used, alloc);
        }
        sum += (double)s * w->weight;
        wsum += w->weight;
    }
    return wsum > 0 ? floor(sum / wsum) : 0.0;
}

static double score_balanced(const score_policy *p, const model_pod *pod, const cache_node *node,
                             const model_registry *reg)
{
    double frac[SCORE_MAX_WEIGHTS], total = 0;
    int n = 0;
    for (int i = 0; i < p->nw; i++) {
        int64_t alloc, req, podreq;
        if (p->w[i].weight <= 0 ||
            !weight_amounts(p, &p->w[i], pod, node, reg, &alloc, &req, &podreq, false))
            continue;
        double f = (double)sat_add(req, podreq) / (double)alloc;
        if (f > 1)
            f = 1;
        frac[n++] = f;
        total += f;
    }
    double sd = 0;
    if (n == 2) {
        sd = fabs((frac[0] - frac[1]) / 2);
    } else if (n > 2) {
        double mean = total / n, acc = 0;
        for (int i = 0; i < n; i++)
            acc += (frac[i] - mean) * (frac[i] - mean);
        sd = sqrt(acc / n);
    }
    return (double)(int64_t)((1 - sd) * MAX_NODE_SCORE);
}

/* best-fit, measure fraction (the FGD paper's simulator): the weighted mean
 * over the weighted resources of (free - pod) / allocatable after placement,
 * lower is better, as 100 * (1 - mean). Unlike the kube-scheduler
 * strategies the GPU counts for pods without GPUs too (their leftover is the
 * node's free GPU), and a resource the node lacks counts as 0 with its
 * weight, so a CPU pod prefers a node without GPUs. */
static double best_fit_fraction(const score_policy *p, const model_pod *pod, const cache_node *node,
                                const model_registry *reg)
{
    double left = 0, wsum = 0;
    int n;
    const model_resvec *nalloc = hot_alloc(node, &n);
    for (int i = 0; i < p->nw; i++) {
        const score_weight *w = &p->w[i];
        if (w->weight <= 0)
            continue;
        double alloc, l;
        if (w->gpu) {
            int64_t used = 0;
            for (int d = 0; d < n; d++)
                used += cache_node_gpu_used(node, d);
            alloc = (double)n * MODEL_GPU_MILLI;
            l = alloc - (double)used - (double)pod->gpu_count * pod->gpu_milli;
        } else {
            int r = weight_index(w, reg);
            alloc = r >= 0 ? (double)nalloc->v[r] : 0;
            l = r >= 0 ? alloc - (double)cache_node_requested(node, r) - (double)pod->req.v[r] : 0;
        }
        wsum += w->weight;
        if (alloc > 0)
            left += w->weight * (l > 0 ? l : 0) / alloc;
    }
    return wsum > 0 ? 100.0 * (1.0 - left / wsum) : 0;
}

/* best-fit: the weighted leftover after placement in the resources' units
 * (absolute, so a small node that the pod fills snugly wins), mapped
 * monotonically onto (0, 100]. */
static double score_best_fit(const score_policy *p, const model_pod *pod, const cache_node *node,
                             const model_registry *reg)
{
    double left = 0, wsum = 0;
    if (p->bf_fraction)
        return best_fit_fraction(p, pod, node, reg);
    for (int i = 0; i < p->nw; i++) {
        const score_weight *w = &p->w[i];
        int64_t alloc, req, podreq;
        if (w->weight <= 0 || !weight_amounts(p, w, pod, node, reg, &alloc, &req, &podreq, false))
            continue;
        double l = (double)alloc - (double)req - (double)podreq;
        if (l < 0)
            l = 0;
        left += w->weight * l / w->unit;
        wsum += w->weight;
    }
    if (wsum <= 0)
        return 0;
    left /= wsum;
    return 100.0 / (1.0 + left / 16.0);
}

/* ------------------------------------------------------------------ */
/* fgd                                                                 */
/* ------------------------------------------------------------------ */

/* Sum of free milli on devices with less free than d. */
static int64_t free_below(const view *v, int32_t d)
{
    int64_t s = 0;
    for (int i = 0; i < v->ngpu; i++)
        if (v->f[i] > 0 && v->f[i] < d)
            s += v->f[i];
    return s;
}

/* fgd fragmentation of the view over the typical shapes, in milli-GPU. */
static double fgd_frag(const score_policy *p, const view *v, int ntyp)
{
    gpu_sum g = view_gpu(v);
    if (g.total == 0)
        return 0;
    /* Per GPU demand class: the device fragment once, then either the
     * whole class at once (the node has room for its largest CPU and
     * memory request, the common case) or shape by shape; a shape that
     * does not fit CPU or memory (or asks for no GPU) sees all idle GPU
     * as fragment. */
    int ncls = __atomic_load_n(&p->ncls, __ATOMIC_RELAXED);
    double total = (double)g.total, F = 0;
    /* Idle devices sorted ascending: share classes come in ascending milli,
     * so "free below milli" is a running sum over one pass. */
    int32_t fs[MODEL_MAX_GPUS];
    int nf = 0;
    for (int i = 0; i < v->ngpu; i++) {
        int32_t f = v->f[i];
        if (f <= 0)
            continue;
        int j = nf++;
        while (j > 0 && fs[j - 1] > f) {
            fs[j] = fs[j - 1];
            j--;
        }
        fs[j] = f;
    }
    int pos = 0;
    int64_t below = 0;
    uint32_t last_milli = 0;
    for (int c = 0; c < ncls; c++) {
        uint32_t cnt = __atomic_load_n(&p->cls_cnt[c], __ATOMIC_RELAXED);
        uint32_t milli = __atomic_load_n(&p->cls_milli[c], __ATOMIC_RELAXED);
        double cpop = ld(&p->cls_pop[c]);
        int64_t frag;
        if (cnt == 0) {
            F += cpop * total;
            continue;
        }
        if (milli >= MODEL_GPU_MILLI) {
            frag = g.nfull >= (int)cnt ? g.total - (int64_t)g.nfull * MODEL_GPU_MILLI : g.total;
        } else if (g.max < (int32_t)milli) {
            frag = g.total;
        } else {
            if (milli < last_milli) {
                pos = 0;
                below = 0;
            }
            last_milli = milli;
            while (pos < nf && fs[pos] < (int32_t)milli)
                below += fs[pos++];
            frag = below;
        }
        double cf = (double)frag;
        if (__atomic_load_n(&p->cls_max_cpu[c], __ATOMIC_RELAXED) <= v->cpu_free &&
            __atomic_load_n(&p->cls_max_mem[c], __ATOMIC_RELAXED) <= v->mem_free) {
            F += cpop * cf;
            continue;
        }
        int first = __atomic_load_n(&p->cls_first[c], __ATOMIC_RELAXED);
        int end = __atomic_load_n(&p->cls_end[c], __ATOMIC_RELAXED);
        if (end > ntyp)
            end = ntyp;
        for (int i = first < 0 ? 0 : first; i < end; i++) {
            const score_typical *t = &p->typ[i];
            int64_t cpu = __atomic_load_n(&t->cpu, __ATOMIC_RELAXED);
            int64_t mem = __atomic_load_n(&t->mem, __ATOMIC_RELAXED);
            double pop = ld(&t->pop);
            F += pop * (cpu <= v->cpu_free && mem <= v->mem_free ? cf : total);
        }
    }
    return F;
}

/* See score.h. */
double score_fgd_fragment(const cache_node *node, const score_task_shape *shapes, size_t n)
{
    view v;
    view_load(&v, node);
    gpu_sum g = view_gpu(&v);
    if (g.total == 0)
        return 0;
    double F = 0;
    for (size_t i = 0; i < n; i++) {
        const score_task_shape *t = &shapes[i];
        int64_t frag;
        if (t->gpu_count == 0 || t->cpu > v.cpu_free || t->mem > v.mem_free)
            frag = g.total;
        else if (t->gpu_milli >= MODEL_GPU_MILLI)
            frag = g.nfull >= (int)t->gpu_count ? g.total - (int64_t)g.nfull * MODEL_GPU_MILLI
                                                : g.total;
        else
            frag = g.max >= (int32_t)t->gpu_milli ? free_below(&v, (int32_t)t->gpu_milli) : g.total;
        F += t->pop * (double)frag;
    }
    return F;
}

static double score_fgd(const score_policy *p, const model_pod *pod, const cache_node *node)
{
    int ntyp = __atomic_load_n(&p->ntyp, __ATOMIC_ACQUIRE);
    view v;
    view_load(&v, node);
    if (v.ngpu == 0)
        return 50; /* no GPU: fragmentation cannot change */
    double before = fgd_frag(p, &v, ntyp);
    view_place(&v, pod);
    double after = fgd_frag(p, &v, ntyp);
    /* Fragmentation growth is at most MODEL_MAX_GPUS GPUs; keep the exact
     * order while mapping it onto [0, 100]. */
    double s = 50.0 - 50.0 * (after - before) / (MODEL_MAX_GPUS * (double)MODEL_GPU_MILLI);
    return s < 0 ? 0 : s > 100 ? 100 : s;
}

/* ------------------------------------------------------------------ */
/* fragment                                                            */
/* ------------------------------------------------------------------ */

/* A view's free GPU and its waste's device terms (frag_waste), kept with
 * the waste before a pod so that the waste after a pod that changes no
 * partly used device needs the stranding term only (frag_waste_parts). */
typedef struct frag_parts {
    int64_t total; /* free GPU (milli) */
    double frag;   /* partial devices' expected waste (before f_frag) */
    double multi;  /* free GPU too few whole devices hold (before f_multi) */
} frag_parts;

/* GPU (milli) of total free that the view's remaining CPU or memory
 * cannot feed, at the learned means or (with strandMix) expected over the
 * CPU-per-GPU classes of the demand. */
static double frag_strand(const score_policy *p, const view *v, int64_t total)
{
    double cpu_free = v->cpu_free > 0 ? (double)v->cpu_free : 0;
    double mem_free = v->mem_free > 0 ? (double)v->mem_free : 0;
    double feedable = cpu_free * ld(&p->t_milli_per_cpu);
    double by_mem = mem_free * ld(&p->t_milli_per_mem);
    if (by_mem < feedable)
        feedable = by_mem;
    double strand = (double)total - feedable;
    if (strand < 0)
        strand = 0;
    if (p->f_mix > 0) {
        /* The same, expected over the CPU-per-GPU classes of the demand
         * (memory at its mean): GPU the node could feed at the mean ratio
         * may still be stranded for the CPU-hungry part of the mix. With
         * F = min(free GPU T, GPU the memory feeds), class c leaves
         * T - min(cpu_free x a_c, F) unfed; the classes whose CPU feeds
         * less than F are a suffix of the lean-first table (from k), so
         * mix = T - F x P(before k) - cpu_free x sum(p_c a_c, c >= k). */
        double t = (double)total;
        double f = by_mem < t ? by_mem : t;
        int k = 0; /* counted without branches; unused slots hold -1 */
        for (int c = 0; c < SCORE_RATIO_CLASSES; c++)
            k += cpu_free * ld(&p->t_rc_icpu[c]) >= f;
        double mix = t - f * ld(&p->t_rc_ppre[k]) - cpu_free * ld(&p->t_rc_asuf[k]);
        if (mix < 0)
            mix = 0;
        strand = (1 - p->f_mix) * strand + p->f_mix * mix;
    }
    return strand;
}

/* Expected unusable GPU (milli) of a view: GPU that the node's remaining
 * CPU or memory cannot feed (stranded), plus partial devices weighted by
 * the chance that the next GPU demand does not fit in them, plus (with
 * multiGpu) the node's free GPU weighted by the chance that the next GPU
 * pod needs more fully free devices than it has. *parts gets the view's
 * free GPU and device terms. */
static double frag_waste(const score_policy *p, const view *v, frag_parts *parts)
{
    gpu_sum g = view_gpu(v);
    *parts = (frag_parts){g.total, 0, 0};
    if (g.total == 0)
        return 0;
    double strand = frag_strand(p, v, g.total);
    for (int i = 0; i < v->ngpu; i++) {
        int32_t f = v->f[i];
        if (f > 0 && f < MODEL_GPU_MILLI)
            parts->frag += (double)f * ld(&p->t_p_above[f / 50]);
    }
    /* A GPU pod that needs more fully free devices than the node has
     * cannot use any of its free GPU (FGD's rule for whole-GPU demands). */
    if (p->f_multi > 0)
        parts->multi = (double)g.total * ld(&p->t_k_above[g.nfull]);
    return p->f_strand * strand + p->f_frag * parts->frag + p->f_multi * parts->multi;
}

/* frag_waste of a view with parts->total free GPU whose partly used
 * devices are those parts were taken from (a view after a CPU-only pod, or
 * a whole-GPU pod without multiGpu, lands): the same value to the bit, as
 * the partial devices' terms are summed in the same order. */
static double frag_waste_parts(const score_policy *p, const view *v, const frag_parts *parts)
{
    if (parts->total == 0)
        return 0;
    return p->f_strand * frag_strand(p, v, parts->total) + p->f_frag * parts->frag +
           p->f_multi * parts->multi;
}

/* view_keeps: the node, as v (after the pod), has less free CPU or memory
 * than reserve keeps for its free_gpu milli (score_keeps). */
static bool view_keeps(const score_policy *p, const view *v, int64_t free_gpu)
{
    double r = ld(&p->t_reserve);
    if (r <= 0 || free_gpu <= 0)
        return false;
    double need = r * (double)free_gpu;
    return (double)v->cpu_free < need * ld(&p->t_cpu_per_milli) ||
           (double)v->mem_free < need * ld(&p->t_mem_per_milli);
}

/* devices_short: are nfree of dev devices at most keepFree of them, or at
 * most keepFreeFragmented while they hold at most half of the free_milli
 * free on all devices? The second asks whether free devices are short
 * against what is free at all: where the free capacity is mostly wholly
 * free devices (pods pinned to other models were refused, say), the
 * devices are idle, not scarce, and a share that opens one costs nothing
 * before more pods come; where most of it is already in pieces, each
 * share that strands a device adds to what nothing fills. */
static bool devices_short(const score_policy *p, uint64_t dev, uint64_t nfree, uint64_t free_milli)
{
    if (dev == 0)
        return false;
    if ((double)nfree <= p->f_keep_free * (double)dev)
        return true;
    return (double)nfree <= p->f_keep_frag * (double)dev &&
           2 * (double)nfree * MODEL_GPU_MILLI <= (double)free_milli;
}

/* See score.h. */
bool score_policy_devices_short(const score_policy *p, const cache *c)
{
    if (p->strategy != SCORE_FRAGMENT || p->f_keep_free <= 0)
        return false;
    uint64_t dev, nfree;
    cache_gpu_devices(c, &dev, &nfree);
    return devices_short(p, dev, nfree, cache_gpu_free_milli(c));
}

/* See score.h. */
bool score_policy_reads_device_counts(const score_policy *p)
{
    return p->strategy == SCORE_FRAGMENT && p->f_model > 0 &&
           __atomic_load_n(&p->t_npm, __ATOMIC_ACQUIRE) > 0;
}

/* view_keeps_device: keepFree keeps the node (before the pod, as v, with
 * free_gpu milli free) from pod (score_keeps). Cheap tests first: it runs
 * for every share on every node. */
static bool view_keeps_device(const score_policy *p, const model_pod *pod, const cache_node *node,
                              const view *v, int64_t free_gpu)
{
    if (pod->gpu_count != 1 || pod->gpu_milli >= MODEL_GPU_MILLI || !node->cluster_gpus ||
        p->f_keep_free <= 0)
        return false;
    if (!devices_short(p, __atomic_load_n(&node->cluster_gpus[0], __ATOMIC_RELAXED),
                       __atomic_load_n(&node->cluster_gpus[1], __ATOMIC_RELAXED),
                       __atomic_load_n(&node->cluster_gpus[2], __ATOMIC_RELAXED)))
        return false;
    int32_t m = (int32_t)pod->gpu_milli;
    int best = view_share_device(v, m);
    /* best fit takes a partly used device whenever one holds the share */
    if (best < 0 || v->f[best] < MODEL_GPU_MILLI)
        return false;
    if ((double)v->cpu_free < (double)free_gpu * ld(&p->t_cpu_per_milli))
        return false;
    return ld(&p->t_fill[(MODEL_GPU_MILLI - m) / 50]) < p->f_fillable;
}

/* A node's waste before the pod (frag_waste of its view) depends on the
 * node's state and the learned tables only, not on the pod; a scan asks
 * it of every node for every pod, and most nodes have not changed since
 * the last pod. So it is kept per cache slot (FRAG_MEMO_SIZE entries,
 * 896 KB a fragment policy; a slot past them shares an entry, which only
 * costs misses), with its frag_parts (so the waste after a CPU-only pod
 * reads no device), tagged with the node's id and generation and the
 * tables' generation. Scans run in parallel, so an entry is a seqlock of
 * atomics: a writer claims it by making seq odd (a busy entry is left
 * alone), a reader takes it only when seq was even and unchanged around
 * its reads. Without it fragment decides at about 0.75 of
 * least-allocated's rate in bench_score. */
static bool frag_memo_get(const score_policy *p, const cache_node *node, uint64_t ngen,
                          uint64_t tgen, double *waste, frag_parts *parts)
{
    struct frag_memo_ent *e = &p->memo[node->slot & (FRAG_MEMO_SIZE - 1)];
    uint32_t s1 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
    if (s1 & 1)
        return false;
    /* acquire: seq's second load stays after these (no fence: TSan has
     * none) */
    bool hit = __atomic_load_n(&e->id, __ATOMIC_ACQUIRE) == node->id &&
               __atomic_load_n(&e->ngen, __ATOMIC_ACQUIRE) == ngen &&
               __atomic_load_n(&e->tgen, __ATOMIC_ACQUIRE) == tgen;
    double w, fr, mu;
    __atomic_load(&e->waste, &w, __ATOMIC_ACQUIRE);
    __atomic_load(&e->frag, &fr, __ATOMIC_ACQUIRE);
    __atomic_load(&e->multi, &mu, __ATOMIC_ACQUIRE);
    int32_t total = __atomic_load_n(&e->free_total, __ATOMIC_ACQUIRE);
    if (!hit || __atomic_load_n(&e->seq, __ATOMIC_RELAXED) != s1)
        return false;
    *waste = w;
    *parts = (frag_parts){total, fr, mu};
    return true;
}

static void frag_memo_put(const score_policy *p, const cache_node *node, uint64_t ngen,
                          uint64_t tgen, double waste, const frag_parts *parts)
{
    struct frag_memo_ent *e = &p->memo[node->slot & (FRAG_MEMO_SIZE - 1)];
    uint32_t s = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
    if ((s & 1) ||
        !__atomic_compare_exchange_n(&e->seq, &s, s + 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return;
    /* release: each field becomes visible after the odd seq */
    __atomic_store_n(&e->id, node->id, __ATOMIC_RELEASE);
    __atomic_store_n(&e->ngen, ngen, __ATOMIC_RELEASE);
    __atomic_store_n(&e->tgen, tgen, __ATOMIC_RELEASE);
    __atomic_store(&e->waste, &waste, __ATOMIC_RELEASE);
    double frag = parts->frag, multi = parts->multi;
    __atomic_store(&e->frag, &frag, __ATOMIC_RELEASE);
    __atomic_store(&e->multi, &multi, __ATOMIC_RELEASE);
    __atomic_store_n(&e->free_total, (int32_t)parts->total, __ATOMIC_RELEASE);
    __atomic_store_n(&e->seq, s + 2, __ATOMIC_RELEASE);
}

/* The most a model's r counts (a model almost full would otherwise push
 * every other pod off its last free milli at any price). */
#define SCORE_MODEL_R_MAX 4.0

/* model_pressure: how far the GPU demand pinned to node's model exceeds
 * the model's share of the free GPU capacity, max(0, r - 1) with r =
 * (share of the GPU demand pinned to sets holding the model) / (the
 * model's share of the free milli-GPU a scheduler may place on), at most
 * SCORE_MODEL_R_MAX; 0 without pins, model or counts. The share is taken
 * at free-capacity levels (gpu_free_level, each level counted at its
 * middle), so the score changes only when the cache's device version
 * does. Where the model fills faster than the cluster (other pods take
 * it first), its share of the free capacity falls and r rises, until the
 * pods that could go elsewhere do. */
static double model_pressure(const score_policy *p, const cache_node *node)
{
    int npm = __atomic_load_n(&p->t_npm, __ATOMIC_ACQUIRE);
    const cache_gpu_model *gm = node->gpu_model;
    if (!npm || !gm || !node->cluster_gpus)
        return 0;
    int k = 0;
    while (k < npm && strcmp(p->t_pm_name[k], gm->name) != 0)
        k++;
    if (k == npm)
        return 0;
    uint64_t md = __atomic_load_n(&gm->devices, __ATOMIC_RELAXED);
    uint64_t all = __atomic_load_n(&node->cluster_gpus[0], __ATOMIC_RELAXED);
    if (!md || !all)
        return 0;
    double lm = gpu_free_level(__atomic_load_n(&gm->free_milli, __ATOMIC_RELAXED), md);
    double lc = gpu_free_level(__atomic_load_n(&node->cluster_gpus[2], __ATOMIC_RELAXED), all);
    double r = ld(&p->t_pm_share[k]) * (double)all / (double)md * (lc + 0.5) / (lm + 0.5);
    if (r > SCORE_MODEL_R_MAX)
        r = SCORE_MODEL_R_MAX;
    return r > 1 ? r - 1 : 0;
}

static double score_fragment(const score_policy *p, const model_pod *pod, const cache_node *node)
{
    /* A node built by hand (id 0: tests, tools) is never memoized. The
     * node's generation is read before its view, and the cache bumps it
     * after the usage it covers: an entry's waste is of its tag's usage
     * or, when a write raced the view, of newer usage, which a scan
     * racing that write reads anyway; the bump then retires the entry. */
    bool memo = p->memo && node->id;
    uint64_t ngen = memo ? cache_node_generation(node) : 0;
    uint64_t tgen = memo ? __atomic_load_n(&p->gen, __ATOMIC_ACQUIRE) : 0;
    view v;
    view_load_cpu(&v, node);
    double gpu_alloc = (double)v.ngpu * MODEL_GPU_MILLI;
    frag_parts parts;
    double before, after;
    /* A CPU-only pod leaves the devices as they are: on a memo hit its
     * waste after needs neither them nor their terms again. */
    bool hit = memo && frag_memo_get(p, node, ngen, tgen, &before, &parts);
    if (!hit || pod->gpu_count)
        view_load_devices(&v, node);
    if (!hit) {
        before = frag_waste(p, &v, &parts);
        if (memo)
            frag_memo_put(p, node, ngen, tgen, before, &parts);
    }
    if (view_keeps_device(p, pod, node, &v, parts.total))
        return SCORE_KEPT;
    bool placed = view_place(&v, pod);
    if (!pod->gpu_count) {
        if (view_keeps(p, &v, parts.total))
            return SCORE_KEPT;
        after = frag_waste_parts(p, &v, &parts);
    } else if (placed && pod->gpu_milli >= MODEL_GPU_MILLI && p->f_multi <= 0) {
        /* whole devices went from free to used: no partial device changed */
        parts.total -= (int64_t)pod->gpu_count * MODEL_GPU_MILLI;
        after = frag_waste_parts(p, &v, &parts);
    } else {
        after = frag_waste(p, &v, &parts);
    }
    int64_t free_gpu = parts.total;
    /* The devices of a model that pods pinned to it ask for beyond its
     * share of the free capacity are wasted on a pod that could go
     * elsewhere (modelPressure). */
    if (pod->gpu_count && placed && p->f_model > 0)
        after +=
            p->f_model * model_pressure(p, node) * (double)pod->gpu_count * (double)pod->gpu_milli;
    /* Spreading CPU and memory (not GPU) places a CPU-only pod, whose waste
     * change is zero on most nodes, as least-allocated would. For a pod
     * asking for GPUs (spreadGpu) it keeps nodes partly used: with 0 its
     * ties go to a fixed node order (first fit, below), which leaves the
     * other nodes whole for multi-GPU pods and lets nodes drain when pods
     * leave. */
    double w = pod->gpu_count ? p->f_spread_gpu : p->f_spread;
    double l = ld(&p->t_cpu_blend);
    double s = 50.0 - 50.0 * ld(&p->t_gpu_share) * (after - before) * PER_WASTE_SCALE;
    /* The CPU and memory terms cost two divisions a node, and at the
     * default a GPU pod uses none of them (no spreadGpu, pack or spreadCpu):
     * its score is then the waste term alone, the same double the sum
     * below would give (adding 0 x a finite term). */
    if (w != 0 || p->f_pack > 0 || l > 0) {
        /* inverses: one division a resource per node where the terms
         * below took three */
        double icpu = v.cpu_alloc > 0 ? 1.0 / (double)v.cpu_alloc : 0;
        double imem = v.mem_alloc > 0 ? 1.0 / (double)v.mem_alloc : 0;
        double cpu_frac = (double)v.cpu_free * icpu;
        double cpu_left = cpu_frac;
        double mem_left = (double)v.mem_free * imem;
        if (p->f_surplus && !pod->gpu_count && v.ngpu) {
            /* Spread over what the node can spare: its free CPU and memory
             * less what its free GPUs need at the learned ratios, as much
             * as GPU pods come (g), so a CPU-only pod goes first where the
             * CPU is least needed by the GPUs beside it. */
            double g = ld(&p->t_gpu_share) * (double)free_gpu;
            cpu_left -= g * ld(&p->t_cpu_per_milli) * icpu;
            mem_left -= g * ld(&p->t_mem_per_milli) * imem;
        }
        double spread = 50.0 * (cpu_left + mem_left);
        double pack = 0;
        if (p->f_pack > 0)
            pack = gpu_alloc > 0 ? 100.0 * (1.0 - (double)free_gpu / gpu_alloc)
                                 : 100.0 * (1 - cpu_left);
        s = s + p->f_pack * pack + w * spread;
        /* spreadCpu: where CPU-only pods ask for more CPU than GPU pods
         * (the excess 2c - 1 of c, the share of the CPU demand in CPU-only
         * pods), the score blends toward least-allocated on CPU by that
         * excess: with CPU short, CPU is then kept beside every node's
         * free GPUs (the GPU pods take part of each node's CPU before
         * CPU-only pods take whole nodes'), and the large CPU-only pods
         * find no room sooner. Off by default: reserve keeps that CPU, and
         * the blend spreads GPU pods too, so fewer nodes stay whole for
         * multi-GPU pods. */
        if (l > 0 && v.cpu_alloc > 0) {
            s = s < 0 ? 0 : s > 100 ? 100 : s;
            s = (1 - l) * s + l * 100.0 * cpu_frac;
        }
    }
    /* Without spread, ties go to the earlier node in the cache's order
     * (first fit) by a difference far below any waste step (a milli-GPU
     * moves the score by about 1e-3 x the GPU pod share), so the scan
     * keeps the first of equal nodes without comparing names. */
    if (w == 0)
        s -= 1e-10 * (double)node->slot;
    return s < 0 ? 0 : s > 100 ? 100 : s;
}

/* See score.h. */
bool score_keeps(const score_policy *p, const model_pod *pod, const cache_node *node)
{
    if (p->strategy != SCORE_FRAGMENT)
        return false;
    view v;
    if (pod->gpu_count) {
        if (pod->gpu_count != 1 || p->f_keep_free <= 0)
            return false;
        view_load(&v, node);
        return view_keeps_device(p, pod, node, &v, view_gpu(&v).total);
    }
    if (ld(&p->t_reserve) <= 0)
        return false;
    view_load(&v, node);
    if (!view_place(&v, pod))
        return false;
    return view_keeps(p, &v, view_gpu(&v).total);
}

/* See score.h. */
double score_node(const score_policy *p, const model_pod *pod, const cache_node *node)
{
    const model_registry *reg = policy_reg(p, node);
    switch (p->strategy) {
    case SCORE_LEAST_ALLOCATED:
        return score_allocated(p, pod, node, reg, false);
    case SCORE_MOST_ALLOCATED:
        return score_allocated(p, pod, node, reg, true);
    case SCORE_BALANCED_ALLOCATION:
        return score_balanced(p, pod, node, reg);
    case SCORE_BEST_FIT:
        return score_best_fit(p, pod, node, reg);
    case SCORE_FGD:
        return score_fgd(p, pod, node);
    case SCORE_FRAGMENT:
        return score_fragment(p, pod, node);
    case SCORE__COUNT:
        break;
    }
    assert(!"bad strategy");
    return 0;
}

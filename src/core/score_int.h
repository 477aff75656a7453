/*
 * score_int.h - private layout of score_policy, shared by score.c (the
 * strategies) and policy.c (the YAML loader). Not a public header.
 */
#ifndef AGENTSCHED_SCORE_INT_H
#define AGENTSCHED_SCORE_INT_H

#include <stdint.h>

#include "agentsched/model/labels.h"
#include "agentsched/model/node.h"
#include "agentsched/model/registry.h"
#include "agentsched/base/pool.h"
#include "agentsched/core/score.h"

#define SCORE_MAX_WEIGHTS   MODEL_MAX_RES
#define SCORE_MAX_SHAPES    256 /* learned task-shape slots (open addressing) */
#define SCORE_MAX_TYPICAL   32  /* shapes fgd evaluates per node */
#define SCORE_HIST_BUCKETS  21  /* per-GPU demand histogram, 50-milli buckets */
#define SCORE_RATIO_CLASSES 5   /* GPU pods by CPU per GPU: below 1 core, then x4 */
#define SCORE_PIN_SETS      64  /* learned sets of GPU models pods are pinned to */
#define SCORE_PIN_KEY       256 /* a set as "|A|B|" */
#define SCORE_PIN_MODELS    32  /* models named by those sets */
#define SCORE_MODEL_NAME    64

/* A resource weight by name. idx caches the registry index once the name is
 * interned (-1 until then; registry names never move, so caching is safe). */
typedef struct score_weight {
    char name[MODEL_RES_NAME_MAX];
    double weight;
    double unit; /* best-fit: leftover is measured in these base units */
    int idx;     /* atomic */
    bool gpu;    /* the whole-GPU resource: measured per device in milli */
} score_weight;

/* A task shape. cpu in millicores, mem in bytes, gpu_milli per device. */
typedef struct score_shape {
    int64_t cpu;
    int64_t mem;
    uint32_t gpu_count;
    uint32_t gpu_milli;
} score_shape;

/* Learned shape slot: state 0 empty, 1 being written, 2 ready (atomic). */
typedef struct score_shape_slot {
    int state;
    score_shape shape;
    uint64_t count; /* atomic */
} score_shape_slot;

/* A learned set of GPU models pods are pinned to (the policy's model label
 * in their nodeSelector or required node affinity), as "|A|B|", with the
 * GPU milli those pods asked for. state as score_shape_slot's. */
typedef struct score_pin_slot {
    int state;
    char key[SCORE_PIN_KEY];
    uint64_t milli; /* atomic */
} score_pin_slot;

/* A typical shape as fgd evaluates it; fields written with atomics so a
 * rebuild racing a reader yields a stale mix, never undefined behaviour. */
typedef struct score_typical {
    int64_t cpu;
    int64_t mem;
    uint32_t gpu_count;
    uint32_t gpu_milli;
    double pop; /* popularity, sums to 1 over the table */
    int cls;    /* index into the policy's GPU demand classes */
} score_typical;

struct score_policy {
    int refs; /* atomic */
    score_strategy strategy;
    const model_registry *reg; /* borrowed; outlives the policy */
    pool *pool;                /* owns agent names/labels */

    score_weight w[SCORE_MAX_WEIGHTS];
    int nw;

    /* GPU resource names the policy expects (see score_policy_gpu_names). */
    char gpu_name[MODEL_RES_NAME_MAX];
    char gpu_share_name[MODEL_RES_NAME_MAX];
    char gpu_model_label[MODEL_RES_NAME_MAX];
    /* Device annotation contracts written before a Binding (gpuannot.h
     * GPUANNOT_* bits; score_policy_gpu_annotations). */
    uint32_t gpu_annotations;

    /* Agent pods: schedulerName in names, or every label in labels. */
    const char **agent_sched;
    size_t nagent_sched;
    model_kv *agent_labels;
    size_t nagent_labels;

    double soft_bonus;
    double ext_lo, ext_hi; /* score range mapped linearly onto 0..ext_max */
    int ext_max;
    bool ext_floor;
    uint32_t ext_shortlist; /* filter answers this many best nodes; 0: all */
    uint32_t candidates;    /* standalone top-K */
    double min_score;       /* standalone: candidates below are dropped */
    bool bf_fraction;       /* best-fit: leftover as a fraction of allocatable */

    /* fgd / fragment: task-shape popularity. */
    bool learn;
    double pop_threshold; /* typical shapes cover this share of pods */
    score_shape_slot slots[SCORE_MAX_SHAPES];
    uint64_t observed; /* atomic */
    int rebuilding;    /* atomic try-lock for the typical table */
    score_typical typ[SCORE_MAX_TYPICAL];
    int ntyp;                              /* atomic */
    uint32_t cls_cnt[SCORE_MAX_TYPICAL];   /* GPU demand classes of the typical */
    uint32_t cls_milli[SCORE_MAX_TYPICAL]; /* shapes: devices x milli (atomics) */
    int cls_first[SCORE_MAX_TYPICAL];      /* typ[first, end) belong to the class */
    int cls_end[SCORE_MAX_TYPICAL];
    double cls_pop[SCORE_MAX_TYPICAL];      /* summed popularity of the class */
    int64_t cls_max_cpu[SCORE_MAX_TYPICAL]; /* largest cpu / memory of its shapes */
    int64_t cls_max_mem[SCORE_MAX_TYPICAL];
    int ncls; /* atomic */

    /* fragment: learned aggregates (atomics). */
    uint64_t gpu_pods, gpu_milli_sum, gpu_cpu_sum, gpu_mem_mib_sum;
    uint64_t cpu_pods, cpu_only_cpu_sum; /* CPU-only pods and their cpu millicores */
    uint64_t hist[SCORE_HIST_BUCKETS];   /* per-device demand, 50-milli buckets */
    uint64_t khist[MODEL_MAX_GPUS + 1];  /* GPU pods by fully free devices needed */
    /* GPU pods by CPU per GPU (SCORE_RATIO_CLASSES): their milli and cpu. */
    uint64_t rc_milli[SCORE_RATIO_CLASSES], rc_cpu[SCORE_RATIO_CLASSES];

    /* fragment parameters. */
    double f_strand;     /* weight of GPU stranded by exhausted CPU/memory */
    double f_frag;       /* weight of partial-GPU fragments */
    double f_pack;       /* weight of packing (prefer nodes with less free) */
    double f_cpu_gpu;    /* prior cpu millicores per GPU (until learned) */
    double f_mem_gpu;    /* prior memory MiB per GPU (until learned) */
    double f_spread;     /* weight of spreading CPU/memory (free fraction) */
    double f_spread_gpu; /* the same for pods asking for GPUs */
    bool f_surplus;      /* CPU-only pods spread by CPU/memory beyond the free GPUs' need */
    double f_multi;      /* weight of whole devices a multi-GPU demand cannot use */
    double f_mix;        /* strand over the CPU-per-GPU mix (1) or its mean (0) */
    double f_spread_cpu; /* every pod spreads over free CPU, x the CPU-only share of CPU */
    double f_reserve;    /* CPU-only pods leave min(1, this x g) of the free GPUs' need */
    double f_keep_free;  /* while wholly free devices are at most this share of all, */
    double f_keep_frag;  /* (or of this, holding at most half the free GPU capacity) */
    double f_fillable;   /* a share whose remainder fewer than this share of shares fit
                          * may not take one (score_keeps) */
    double f_model;      /* weight of a model's pinned demand beyond its share of devices */

    /* fragment: GPU model sets pods are pinned to (open addressing). */
    score_pin_slot pins[SCORE_PIN_SETS];

    /* fragment: derived table, rebuilt with the typical shapes (atomics). */
    double t_cpu_per_milli; /* cpu millicores per milli-GPU */
    double t_mem_per_milli; /* memory bytes per milli-GPU */
    double t_milli_per_cpu; /* their inverses (a scan multiplies) */
    double t_milli_per_mem;
    double t_p_above[SCORE_HIST_BUCKETS]; /* P(per-device demand > bucket) */
    double t_k_above[MODEL_MAX_GPUS + 1]; /* P(GPU pod needs > n free devices) */
    double t_gpu_share;                   /* share of pods asking for GPUs */
    double t_reserve;                     /* min(1, reserve x g) once learned, else 0 */
    /* Share of the shares seen whose demand is in buckets 0..b, i.e. that a
     * remainder in bucket b holds, in 50-milli steps (1 before 20 shares). */
    double t_fill[SCORE_HIST_BUCKETS];
    double t_cpu_blend; /* spreadCpu's blend: spreadCpu x (2c - 1) in [0, 1], c the CPU-only
                         * pods' share of the CPU demand */
    /* Non-empty CPU-per-GPU classes, leanest first: milli-GPU fed per cpu
     * millicore (a class asking for none counts as asking for one
     * millicore in all; unused slots -1), the share of the GPU demand of the classes before
     * c and the demand-weighted feed rate of the classes from c on. */
    int t_nrc;
    double t_rc_icpu[SCORE_RATIO_CLASSES];
    double t_rc_ppre[SCORE_RATIO_CLASSES + 1], t_rc_asuf[SCORE_RATIO_CLASSES + 1];
    /* The models the pin sets name (appended by the rebuilder, then never
     * changed; t_npm published with release) and the share of the GPU
     * demand pinned to a set that holds each (atomic). */
    char t_pm_name[SCORE_PIN_MODELS][SCORE_MODEL_NAME];
    double t_pm_share[SCORE_PIN_MODELS];
    int t_npm; /* atomic */

    /* Bumped (release) after a table rebuild that changed a value the
     * policy's strategy scores with (score_policy_generation). */
    uint64_t gen; /* atomic */
    /* fragment: each node's waste before a pod lands on it, by cache slot
     * (score.c's frag_memo), or NULL; owned. */
    struct frag_memo_ent *memo;
};

/* score_policy_alloc returns a policy with every default set (strategy s);
 * NULL when out of memory. */
score_policy *score_policy_alloc(score_strategy s);

/* score_policy_set_weight adds or replaces a resource weight. */
as_err score_policy_set_weight(score_policy *p, const char *name, double weight, double unit);

/* score_policy_add_shape adds a given (not learned) shape with popularity
 * `pop` (relative; normalised when the table is built). */
as_err score_policy_add_shape(score_policy *p, const score_shape *s, double pop);

/* score_policy_finish builds derived tables after loading. */
void score_policy_finish(score_policy *p);

#endif

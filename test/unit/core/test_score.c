/*
 * test_score.c - every strategy's formula on hand-computed nodes, the FGD
 * fragment on hand examples, learned popularity, the extender mapping, and
 * per-device GPU accounting through the real cache and predicates.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "agentsched/core/binder.h"
#include "agentsched/core/cache.h"
#include "agentsched/core/pred.h"
#include "agentsched/core/sched.h"
#include "agentsched/core/policy.h"
#include "agentsched/core/score.h"
#include "core_fixtures.h"

#define MI ((int64_t)1 << 20)

static model_registry reg;

static void setup(void)
{
    model_registry_init(&reg);
    fx_res(&reg, reg.gpu_name);
}

static void teardown(void)
{
    model_registry_destroy(&reg);
}

TestSuite(score, .init = setup, .fini = teardown);

/* A node view without a cache: spec plus usage set by hand. */
typedef struct hnode {
    cache_node cn;
    model_node *spec;
} hnode;

static void hnode_init(hnode *h, int64_t cpu, int64_t mem, uint32_t gpus)
{
    memset(h, 0, sizeof *h);
    h->spec = fx_node("n", cpu, mem, 110);
    if (gpus)
        fx_node_gpus(&reg, h->spec, gpus);
    h->cn.spec = h->spec;
}

static void hnode_use(hnode *h, int64_t cpu, int64_t mem)
{
    h->cn.requested[MODEL_RES_CPU] = cpu;
    h->cn.requested[MODEL_RES_MEMORY] = mem;
}

static double score(score_strategy s, const model_pod *pod, const hnode *h)
{
    score_policy *p = NULL;
    cr_assert_eq(score_policy_new_strategy(&reg, s, &p), AS_OK);
    double v = score_node(p, pod, &h->cn);
    score_policy_unref(p);
    return v;
}

Test(score, strategy_names_round_trip)
{
    for (int i = 0; i < SCORE__COUNT; i++) {
        score_strategy s;
        cr_assert_eq(score_strategy_parse(score_strategy_name((score_strategy)i), &s), AS_OK);
        cr_assert_eq(s, (score_strategy)i);
    }
    score_strategy s;
    cr_assert_eq(score_strategy_parse("LeastAllocated", &s), AS_EINVAL);
    cr_assert_eq(score_strategy_parse(NULL, &s), AS_EINVAL);
}

Test(score, default_policy_is_fragment)
{
    score_policy *p = NULL;
    cr_assert_eq(score_policy_new_default(&reg, &p), AS_OK);
    cr_assert_eq(score_policy_strategy(p), SCORE_FRAGMENT);
    cr_assert_eq(score_policy_candidates(p), 3);
    score_policy_unref(p);
}

/* Node 3000m / 8Gi with 1000m / 2Gi used; pod 1000m / 2Gi.
 * cpu: (3000-2000)*100/3000 = 33 (integer), memory: (8-4)*100/8 = 50;
 * weighted mean (33 + 50) / 2 = 41 (integer). */
Test(score, least_allocated_kube_formula)
{
    hnode h;
    hnode_init(&h, 3000, 8 * FX_GI, 0);
    hnode_use(&h, 1000, 2 * FX_GI);
    model_pod *pod = fx_pod("p", "p", 1000, 2 * FX_GI);
    cr_assert_float_eq(score(SCORE_LEAST_ALLOCATED, pod, &h), 41.0, 1e-9);
    /* most-allocated: cpu 2000*100/3000 = 66, memory 50 -> 58. */
    cr_assert_float_eq(score(SCORE_MOST_ALLOCATED, pod, &h), 58.0, 1e-9);
    /* Requests above allocatable: least 0, most capped at 100. */
    hnode_use(&h, 3000, 8 * FX_GI);
    cr_assert_float_eq(score(SCORE_LEAST_ALLOCATED, pod, &h), 0.0, 1e-9);
    cr_assert_float_eq(score(SCORE_MOST_ALLOCATED, pod, &h), 100.0, 1e-9);
    model_pod_free(pod);
    model_node_free(h.spec);
}

/* A pod without cpu/memory requests counts kube-scheduler's non-zero
 * defaults (100m, 200Mi) in least/most-allocated. */
Test(score, nonzero_defaults)
{
    hnode h;
    hnode_init(&h, 1000, 1000 * MI, 0);
    model_pod *pod = fx_pod("p", "p", 0, 0);
    /* cpu (1000-100)*100/1000 = 90, memory (1000-200)*100/1000 = 80 -> 85 */
    cr_assert_float_eq(score(SCORE_LEAST_ALLOCATED, pod, &h), 85.0, 1e-9);
    model_pod_free(pod);
    model_node_free(h.spec);
}

/* The GPU weight counts only for pods that ask for GPUs (an extended
 * resource), measured per device in milli-GPU. */
Test(score, gpu_weight_per_device)
{
    hnode h;
    hnode_init(&h, 4000, 4 * FX_GI, 2);
    hnode_use(&h, 0, 0);
    h.cn.gpu_used[0] = 500;
    model_pod *cpu_pod = fx_pod("c", "c", 2000, 2 * FX_GI);
    /* cpu 50, memory 50; GPU skipped */
    cr_assert_float_eq(score(SCORE_MOST_ALLOCATED, cpu_pod, &h), 50.0, 1e-9);
    model_pod *share = fx_pod("s", "s", 2000, 2 * FX_GI);
    fx_pod_gpu(&reg, share, 1, 300);
    /* GPU (500+300)*100/2000 = 40 -> (50 + 50 + 40) / 3 = 46 */
    cr_assert_float_eq(score(SCORE_MOST_ALLOCATED, share, &h), 46.0, 1e-9);
    /* balanced over cpu .5, memory .5, GPU .4: mean .4667, sd = 0.04714 ->
     * int((1 - 0.04714) * 100) = 95 */
    cr_assert_float_eq(score(SCORE_BALANCED_ALLOCATION, share, &h), 95.0, 1e-9);
    model_pod_free(cpu_pod);
    model_pod_free(share);
    model_node_free(h.spec);
}

/* balanced-allocation with two resources: sd = |f1 - f2| / 2. */
Test(score, balanced_two_resources)
{
    hnode h;
    hnode_init(&h, 4000, 8 * FX_GI, 0);
    hnode_use(&h, 1000, 0);
    model_pod *pod = fx_pod("p", "p", 1000, 2 * FX_GI);
    /* cpu .5, memory .25 -> sd .125 -> 87 */
    cr_assert_float_eq(score(SCORE_BALANCED_ALLOCATION, pod, &h), 87.0, 1e-9);
    model_pod_free(pod);
    model_node_free(h.spec);
}

/* best-fit: leftover in units (1 core, 4Gi, 1 GPU), weighted mean L,
 * score 100 / (1 + L/16). Node 8 cores / 16Gi, pod 2 cores / 4Gi:
 * cpu 6 units, memory 3 units -> L = 4.5 -> 100/1.28125. */
Test(score, best_fit_leftover)
{
    hnode small, big;
    hnode_init(&small, 8000, 16 * FX_GI, 0);
    hnode_init(&big, 16000, 64 * FX_GI, 0);
    model_pod *pod = fx_pod("p", "p", 2000, 4 * FX_GI);
    cr_assert_float_eq(score(SCORE_BEST_FIT, pod, &small), 100.0 / 1.28125, 1e-9);
    cr_assert_gt(score(SCORE_BEST_FIT, pod, &small), score(SCORE_BEST_FIT, pod, &big));
    model_pod_free(pod);
    model_node_free(small.spec);
    model_node_free(big.spec);
}

/* best-fit with measure fraction (the FGD paper's simulator): 100 x (1 -
 * mean over cpu and GPU of the leftover fraction after placement). A share
 * of 400 on 2 GPUs with 500 used, 16 of 32 cores used, pod 4 cores:
 * cpu (32 - 16 - 4) / 32 = .375, GPU (2000 - 500 - 400) / 2000 = .55,
 * score 100 x (1 - .4625) = 53.75. A CPU pod's GPU term is the node's free
 * GPU, and 0 on a node without GPUs (with its weight kept). */
Test(score, best_fit_fraction)
{
    static const char yaml[] = "strategy: best-fit\nresources: {cpu: 1, nvidia.com/gpu: 1}\n"
                               "bestFit: {measure: fraction}\n";
    score_policy *p = fx_policy(&reg, yaml);
    hnode g, c;
    hnode_init(&g, 32000, 64 * FX_GI, 2);
    hnode_use(&g, 16000, 0);
    g.cn.gpu_used[0] = 500;
    hnode_init(&c, 32000, 64 * FX_GI, 0);
    hnode_use(&c, 16000, 0);
    model_pod *share = fx_pod("s", "s", 4000, FX_GI);
    share->gpu_count = 1;
    share->gpu_milli = 400;
    cr_assert_float_eq(score_node(p, share, &g.cn), 53.75, 1e-9);
    model_pod *cpu = fx_pod("c", "c", 4000, FX_GI);
    /* GPU node: (.375 + 1500 / 2000) / 2 = .5625; CPU node: .375 / 2. */
    cr_assert_float_eq(score_node(p, cpu, &g.cn), 43.75, 1e-9);
    cr_assert_float_eq(score_node(p, cpu, &c.cn), 81.25, 1e-9);
    model_pod_free(share);
    model_pod_free(cpu);
    model_node_free(g.spec);
    model_node_free(c.spec);
    score_policy_unref(p);
}

/* FGD fragment: node with 2 GPUs free 1000 and 300, plenty of CPU.
 * Shapes: share of 500 (pop .5): fits, fragment = free below 500 = 300;
 * whole GPU (pop .25): one full device, fragment = 1300 - 1000 = 300;
 * CPU-only (pop .25): all idle GPU, 1300. F = 150 + 75 + 325 = 550. */
Test(score, fgd_fragment_hand_example)
{
    hnode h;
    hnode_init(&h, 32000, 64 * FX_GI, 2);
    h.cn.gpu_used[1] = 700;
    score_task_shape shapes[] = {
        {1000, FX_GI, 1, 500, 0.5},
        {1000, FX_GI, 1, 1000, 0.25},
        {1000, FX_GI, 0, 0, 0.25},
    };
    cr_assert_float_eq(score_fgd_fragment(&h.cn, shapes, 3), 550.0, 1e-9);
    /* A shape that does not fit CPU sees all idle GPU: */
    score_task_shape big = {64000, FX_GI, 1, 100, 1};
    cr_assert_float_eq(score_fgd_fragment(&h.cn, &big, 1), 1300.0, 1e-9);
    /* Two whole GPUs do not fit (one device is partly used): all 1300. */
    score_task_shape two = {1000, FX_GI, 2, 1000, 1};
    cr_assert_float_eq(score_fgd_fragment(&h.cn, &two, 1), 1300.0, 1e-9);
    /* A share larger than any device's free: all idle GPU. */
    hnode_use(&h, 0, 0);
    h.cn.gpu_used[0] = 700;
    score_task_shape s800 = {1000, FX_GI, 1, 800, 1};
    cr_assert_float_eq(score_fgd_fragment(&h.cn, &s800, 1), 600.0, 1e-9);
    model_node_free(h.spec);
}

/* fgd score: 50 - 50 * dF / 16000. With given shapes (learn off):
 * share 500 (pop .5) and whole GPU (pop .5) on the node above
 * (free 1000, 300): F = .5*300 + .5*300 = 300. A 200-milli pod goes to
 * device 1 (best fit): free 1000, 100 -> F = .5*100 + .5*100 = 100,
 * dF = -200 -> 50.625. */
Test(score, fgd_score_gradient)
{
    const char *yaml = "strategy: fgd\n"
                       "shapes:\n"
                       "  learn: false\n"
                       "  coverage: 1\n"
                       "  given:\n"
                       "    - {cpu: \"1\", memory: 1Gi, gpu: 1, gpuMilli: 500, popularity: 1}\n"
                       "    - {cpu: \"1\", memory: 1Gi, gpu: 1, popularity: 1}\n";
    score_policy *p = fx_policy(&reg, yaml);
    hnode h;
    hnode_init(&h, 32000, 64 * FX_GI, 2);
    h.cn.gpu_used[1] = 700;
    model_pod *pod = fx_pod("p", "p", 1000, FX_GI);
    fx_pod_gpu(&reg, pod, 1, 200);
    cr_assert_float_eq(score_node(p, pod, &h.cn), 50.625, 1e-9);
    /* Learning is off: observing does not change the score. */
    score_observe_pod(p, pod);
    cr_assert_float_eq(score_node(p, pod, &h.cn), 50.625, 1e-9);
    /* A whole GPU on the full device: F after = .5*300 + .5*300 (no full
     * device left for the whole shape -> all 300) = 300: dF = 0 -> 50. */
    model_pod *whole = fx_pod("w", "w", 1000, FX_GI);
    fx_pod_gpu(&reg, whole, 1, 0);
    cr_assert_float_eq(score_node(p, whole, &h.cn), 50.0, 1e-9);
    model_pod_free(pod);
    model_pod_free(whole);
    model_node_free(h.spec);
    score_policy_unref(p);
}

/* fragment, exact value with the priors (8 cores and 32Gi per GPU,
 * nothing learned): node 8 cores / 64Gi / 1 GPU, CPU-only pod 4 cores /
 * 8Gi. Before: CPU feeds 1000 milli, memory 2000 -> nothing stranded.
 * After: CPU feeds 500 -> 500 milli stranded. Spread over the surplus
 * beyond the free GPU's 8 cores and 32Gi: 0.05 * 50 * ((4 - 8)/8 +
 * (56 - 32)/64) = -0.3125. Score = 50 - 50*500/16000 - 0.3125 = 48.125. */
Test(score, fragment_strand_exact)
{
    hnode h;
    hnode_init(&h, 8000, 64 * FX_GI, 1);
    model_pod *pod = fx_pod("p", "p", 4000, 8 * FX_GI);
    cr_assert_float_eq(score(SCORE_FRAGMENT, pod, &h), 48.125, 1e-9);
    model_pod_free(pod);
    model_node_free(h.spec);
}

/* fragment's strandMix, exact values. Learned: ten 1-GPU pods with 4
 * cores / 8Gi and ten with 16 cores / 8Gi (mean 10 cores per GPU). Node
 * 32 cores / 256Gi / 4 GPUs, CPU-only pod 8 cores / 8Gi.
 * strandMix 1: half the demand needs 16 cores per GPU. Before: it feeds
 * 2000 of 4000 milli -> 0.5 * 2000 = 1000; after (24 cores): 1500 ->
 * 0.5 * 2500 = 1250; dW = 250. strandMix 0 (the mean): before 3200 fed ->
 * 800, after 2400 -> 1600; dW = 800. Spread either way, over the surplus
 * beyond the 4 free GPUs' 40 cores and 32Gi (every pod seen asked for a
 * GPU): 0.05 * 50 * ((24 - 40)/32 + (248 - 32)/256) = 0.859375. Scores:
 * 50 - 50 * dW / 16000 + spread. */
Test(score, fragment_strand_mix_exact)
{
    static const struct {
        const char *mix;
        double want;
    } cases[] = {{"1", 50.078125}, {"0", 48.359375}, {"0.5", 49.21875}};
    hnode h;
    hnode_init(&h, 32000, 256 * FX_GI, 4);
    model_pod *lean = fx_pod("l", "l", 4000, 8 * FX_GI);
    fx_pod_gpu(&reg, lean, 1, 0);
    model_pod *hungry = fx_pod("h", "h", 16000, 8 * FX_GI);
    fx_pod_gpu(&reg, hungry, 1, 0);
    model_pod *pod = fx_pod("p", "p", 8000, 8 * FX_GI);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char yaml[128];
        /* reserve 0: the CPU-only pod would be kept from the node */
        snprintf(yaml, sizeof yaml,
                 "strategy: fragment\nfragment:\n  strandMix: %s\n  reserve: 0\n", cases[i].mix);
        score_policy *p = fx_policy(&reg, yaml);
        for (int k = 0; k < 10; k++) {
            score_observe_pod(p, lean);
            score_observe_pod(p, hungry);
        }
        cr_assert_float_eq(score_node(p, pod, &h.cn), cases[i].want, 1e-9, "strandMix %s: %f",
                           cases[i].mix, score_node(p, pod, &h.cn));
        score_policy_unref(p);
    }
    model_pod_free(lean);
    model_pod_free(hungry);
    model_pod_free(pod);
    model_node_free(h.spec);
}

/* keeps_nothing_off: a fragment policy from `yaml` (the rule under test
 * off) and one of strategy `other` keep node from probe after 40 pods like
 * teach were seen: neither does. */
static void keeps_nothing_off(const char *yaml, score_strategy other, const model_pod *teach,
                              const model_pod *probe, const cache_node *node)
{
    score_policy *p = fx_policy(&reg, yaml);
    for (int k = 0; k < 40; k++)
        score_observe_pod(p, teach);
    cr_assert_not(score_keeps(p, probe, node), "%s keeps nothing", yaml);
    score_policy_unref(p);
    cr_assert_eq(score_policy_new_strategy(&reg, other, &p), AS_OK);
    for (int k = 0; k < 40; k++)
        score_observe_pod(p, teach);
    cr_assert_not(score_keeps(p, probe, node), "only fragment keeps");
    score_policy_unref(p);
}

/* fragment's reserve: GPU pods of 4 cores and 16Gi per GPU were seen, so
 * a GPU node of 32 cores / 128Gi / 4 free GPUs keeps 16 cores and 64Gi
 * for them, times min(1, reserve x g). A CPU-only pod leaving less is
 * kept away (score_keeps; score_node says SCORE_KEPT); leaving as much
 * is scored as usual. Nothing is kept before 20 pods were seen, for a GPU
 * pod, on a node without GPUs, nor with reserve 0. */
Test(score, fragment_reserve_keeps_cpu_beside_free_gpus)
{
    hnode gpu, cpu;
    hnode_init(&gpu, 32000, 128 * FX_GI, 4);
    hnode_init(&cpu, 32000, 128 * FX_GI, 0);
    model_pod *g = fx_pod("g", "g", 4000, 16 * FX_GI);
    fx_pod_gpu(&reg, g, 1, 0);
    model_pod *c = fx_pod("c", "c", 1000, FX_GI);
    model_pod *big = fx_pod("b", "b", 20000, 16 * FX_GI);  /* leaves 12 cores */
    model_pod *fits = fx_pod("f", "f", 16000, 16 * FX_GI); /* leaves 16 */
    model_pod *mem = fx_pod("m", "m", 4000, 100 * FX_GI);  /* leaves 28Gi */
    score_policy *p = NULL;
    cr_assert_eq(score_policy_new_default(&reg, &p), AS_OK);
    for (int k = 0; k < 19; k++)
        score_observe_pod(p, g);
    cr_assert_not(score_keeps(p, big, &gpu.cn), "19 pods seen: nothing kept yet");
    score_observe_pod(p, g);
    /* g = 1: the whole need */
    cr_assert(score_keeps(p, big, &gpu.cn));
    cr_assert_eq(score_node(p, big, &gpu.cn), SCORE_KEPT);
    cr_assert(score_keeps(p, mem, &gpu.cn));
    cr_assert_not(score_keeps(p, fits, &gpu.cn));
    cr_assert_geq(score_node(p, fits, &gpu.cn), 0);
    cr_assert_not(score_keeps(p, g, &gpu.cn), "GPU pods are what it keeps for");
    cr_assert_not(score_keeps(p, big, &cpu.cn), "a node without GPUs keeps nothing");
    cr_assert_geq(score_node(p, big, &cpu.cn), 0);
    /* the node's GPUs in use need nothing: 2 of 4 used keeps 8 cores */
    gpu.cn.gpu_used[0] = MODEL_GPU_MILLI;
    gpu.cn.gpu_used[1] = MODEL_GPU_MILLI;
    cr_assert_not(score_keeps(p, big, &gpu.cn));
    memset(gpu.cn.gpu_used, 0, sizeof gpu.cn.gpu_used);
    /* 20 GPU pods, 44 CPU-only: g = 0.3125, min(1, 2g) keeps 10 cores */
    for (int k = 0; k < 44; k++)
        score_observe_pod(p, c);
    cr_assert_not(score_keeps(p, big, &gpu.cn));
    hnode_use(&gpu, 6000, 0); /* 26 free: the big pod leaves 6 */
    cr_assert(score_keeps(p, big, &gpu.cn));
    score_policy_unref(p);
    keeps_nothing_off("strategy: fragment\nfragment:\n  reserve: 0\n", SCORE_LEAST_ALLOCATED, g,
                      big, &gpu.cn);
    model_pod_free(g);
    model_pod_free(c);
    model_pod_free(big);
    model_pod_free(fits);
    model_pod_free(mem);
    model_node_free(gpu.spec);
    model_node_free(cpu.spec);
}

/* keep_node: the keep tests' node, h (32 cores, 128Gi, 4 free GPUs)
 * reading the cluster's counts from cg (devices, wholly free, free milli),
 * and *big, an 810-milli share of 3 cores; returns the default policy
 * (the caller frees *big and h.spec and unrefs the policy). */
static score_policy *keep_node(hnode *h, uint64_t cg[3], model_pod **big)
{
    hnode_init(h, 32000, 128 * FX_GI, 4);
    h->cn.cluster_gpus = cg;
    *big = fx_pod("b", "b", 3000, 4 * FX_GI);
    fx_pod_gpu(&reg, *big, 1, 810);
    score_policy *p = NULL;
    cr_assert_eq(score_policy_new_default(&reg, &p), AS_OK);
    return p;
}

/* fragment's keepFree: shares of 810 and 470 milli (3 cores each) were
 * seen, half each, so the 190 milli an 810 leaves of a wholly free device
 * fits none of them (under fillable 0.1) and the 530 a 470 leaves fits
 * half. With free devices short (5 of 100 free: keepFree 0.05) an 810
 * share is kept from a node where it would take a wholly free device and
 * the node has the CPU its free GPUs need (4 free GPUs x 4.6875 cores per
 * GPU learned, 60 cores over 12.8 GPUs: 18.75 of 32 cores). Not kept: the
 * 470 share, the 810 where a partly used device holds it or the node lacks
 * that CPU, with 6 of 100 free, before 20 shares were seen, on a node
 * built by hand without the cache's counts, with keepFree 0 or another
 * strategy. */
Test(score, fragment_keep_free_keeps_the_last_free_devices)
{
    hnode h;
    uint64_t cg[3] = {100, 5, 50000};
    model_pod *big = NULL;
    score_policy *p = keep_node(&h, cg, &big);
    model_pod *half = fx_pod("h", "h", 3000, 4 * FX_GI);
    fx_pod_gpu(&reg, half, 1, 470);
    for (int k = 0; k < 9; k++) {
        score_observe_pod(p, big);
        score_observe_pod(p, half);
    }
    score_observe_pod(p, big);
    cr_assert_not(score_keeps(p, big, &h.cn), "19 shares seen: nothing kept yet");
    score_observe_pod(p, half);
    cr_assert(score_keeps(p, big, &h.cn));
    cr_assert_eq(score_node(p, big, &h.cn), SCORE_KEPT);
    cr_assert_not(score_keeps(p, half, &h.cn), "half the shares fill what a 470 leaves");
    cr_assert_geq(score_node(p, half, &h.cn), 0);
    cg[1] = 6;
    cg[2] = 11000;
    cr_assert_not(score_keeps(p, big, &h.cn), "6 of 100 free, most free milli on them: not short");
    cr_assert_geq(score_node(p, big, &h.cn), 0);
    cg[1] = 5;
    cg[2] = 50000;
    h.cn.gpu_used[2] = 150; /* 850 free holds the 810: best fit takes it */
    cr_assert_not(score_keeps(p, big, &h.cn));
    cr_assert_geq(score_node(p, big, &h.cn), 0);
    h.cn.gpu_used[2] = 0;
    hnode_use(&h, 14000, 0); /* 18 cores for 4 free GPUs that need 18.75 */
    cr_assert_not(score_keeps(p, big, &h.cn), "a node short of CPU takes the lean share");
    hnode_use(&h, 13000, 0);
    cr_assert(score_keeps(p, big, &h.cn), "19 cores: enough");
    h.cn.cluster_gpus = NULL;
    cr_assert_not(score_keeps(p, big, &h.cn), "a node built by hand");
    cr_assert_geq(score_node(p, big, &h.cn), 0);
    h.cn.cluster_gpus = cg;
    score_policy_unref(p);
    keeps_nothing_off("strategy: fragment\nfragment:\n  keepFree: 0\n", SCORE_BEST_FIT, big, big,
                      &h.cn);
    model_pod_free(big);
    model_pod_free(half);
    model_node_free(h.spec);
}

/* keepFreeFragmented (0.1): with more than keepFree (0.05) of the devices
 * wholly free, they are short while they are at most keepFreeFragmented
 * of all and hold at most half the free milli (the rest in partly used
 * devices); the cluster's counts alone decide on the same node. */
Test(score, fragment_keep_free_fragmented_keeps_where_free_capacity_is_in_pieces)
{
    hnode h;
    uint64_t cg[3] = {100, 6, 12000};
    model_pod *big = NULL;
    score_policy *p = keep_node(&h, cg, &big);
    for (int k = 0; k < 20; k++)
        score_observe_pod(p, big);
    cr_assert(score_keeps(p, big, &h.cn), "6000 of 12000 free milli on free devices: short");
    cg[2] = 11999;
    cr_assert_not(score_keeps(p, big, &h.cn), "more than half on free devices: idle, not short");
    cg[1] = 10;
    cg[2] = 40000;
    cr_assert(score_keeps(p, big, &h.cn), "10 of 100: still in the band");
    cg[1] = 11;
    cg[2] = 90000;
    cr_assert_not(score_keeps(p, big, &h.cn), "11 of 100: above keepFreeFragmented");
    score_policy_unref(p);
    /* at or under keepFree the band adds nothing; keepFree 0 keeps nothing */
    static const char *const off[] = {
        "strategy: fragment\nfragment:\n  keepFreeFragmented: 0.05\n",
        "strategy: fragment\nfragment:\n  keepFree: 0\n  keepFreeFragmented: 0.5\n"};
    cg[1] = 6;
    cg[2] = 40000;
    for (size_t i = 0; i < sizeof off / sizeof off[0]; i++) {
        p = fx_policy(&reg, off[i]);
        for (int k = 0; k < 20; k++)
            score_observe_pod(p, big);
        cr_assert_not(score_keeps(p, big, &h.cn), "%s", off[i]);
        score_policy_unref(p);
    }
    model_pod_free(big);
    model_node_free(h.spec);
}

/* fragment's modelPressure: of 40 one-GPU pods seen, 10 were pinned to T4
 * (5 by nodeSelector, 5 by required node affinity), a quarter of the GPU
 * demand, while T4 holds 10 of the cluster's 100 devices, half of both
 * free: r = 0.25 x 100 / 10 = 2.5, so a GPU placed on a T4 node adds 0.5
 * x (2.5 - 1) x 1000 milli to the waste, 50 x 750 / 16000 = 2.34375 points
 * below the same node as G2 (no pins). Nothing with 30 T4 devices (r =
 * 0.83), unless T4 has filled faster than the cluster: a fifth of it free
 * (level 12 of 64) against half of all (32), r = 0.83 x 32.5 / 12.5 =
 * 2.17, 1.822916 points; r stops at 4 (T4 full: 4.6875 points at 10
 * devices). Nothing with modelPressure 0, or before any pinned pod. */
Test(score, fragment_model_pressure_keeps_pinned_models_for_their_pods)
{
    hnode t4, g2;
    hnode_init(&t4, 64000, 256 * FX_GI, 4);
    hnode_init(&g2, 64000, 256 * FX_GI, 4);
    uint64_t cg[3] = {100, 50, 50000};
    cache_gpu_model mt4 = {.name = "T4", .devices = 10, .free_milli = 5000},
                    mg2 = {.name = "G2", .devices = 90, .free_milli = 45000};
    t4.cn.cluster_gpus = g2.cn.cluster_gpus = cg;
    t4.cn.gpu_model = &mt4;
    g2.cn.gpu_model = &mg2;
    model_pod *pod = fx_pod("p", "p", 4000, 16 * FX_GI);
    fx_pod_gpu(&reg, pod, 1, 0);
    model_pod *sel = fx_pod("s", "s", 4000, 16 * FX_GI);
    fx_pod_gpu(&reg, sel, 1, 0);
    fx_pod_selector(sel, "agentsched.io/gpu-model", "T4");
    model_pod *aff = fx_pod("a", "a", 4000, 16 * FX_GI);
    fx_pod_gpu(&reg, aff, 1, 0);
    fx_pod_affinity_in(aff, "agentsched.io/gpu-model", "T4");
    static const char *const yaml[] = {"strategy: fragment\n",
                                       "strategy: fragment\nfragment:\n  modelPressure: 0\n"};
    for (int y = 0; y < 2; y++) {
        score_policy *p = fx_policy(&reg, yaml[y]);
        for (int k = 0; k < 30; k++)
            score_observe_pod(p, pod);
        cr_assert_float_eq(score_node(p, pod, &t4.cn), score_node(p, pod, &g2.cn), 1e-12,
                           "no pinned pod seen");
        for (int k = 0; k < 5; k++) {
            score_observe_pod(p, sel);
            score_observe_pod(p, aff);
        }
        double d = score_node(p, pod, &g2.cn) - score_node(p, pod, &t4.cn);
        cr_assert_float_eq(d, y == 0 ? 2.34375 : 0, 1e-9, "modelPressure %s: %g",
                           y == 0 ? "default" : "0", d);
        cr_assert_float_eq(score_node(p, aff, &g2.cn) - score_node(p, aff, &t4.cn), d, 1e-9,
                           "pinned pods weigh the same");
        mt4.devices = 30;
        mt4.free_milli = 15000;
        cr_assert_float_eq(score_node(p, pod, &t4.cn), score_node(p, pod, &g2.cn), 1e-12,
                           "30 of 100 devices: not short");
        mt4.free_milli = 6000;
        d = score_node(p, pod, &g2.cn) - score_node(p, pod, &t4.cn);
        cr_assert_float_eq(
            d, y == 0 ? 50.0 * 0.5 * (0.25 * 100 / 30 * 32.5 / 12.5 - 1) * 1000 / 16000 : 0, 1e-9,
            "T4 a fifth free against half of all: %g", d);
        mt4.devices = 10;
        mt4.free_milli = 0;
        d = score_node(p, pod, &g2.cn) - score_node(p, pod, &t4.cn);
        cr_assert_float_eq(d, y == 0 ? 4.6875 : 0, 1e-9, "r stops at 4: %g", d);
        mt4.free_milli = 5000;
        score_policy_unref(p);
    }
    model_pod_free(pod);
    model_pod_free(sel);
    model_pod_free(aff);
    model_node_free(t4.spec);
    model_node_free(g2.spec);
}

/* fragment's spreadGpu, exact values with the priors (8 cores and 32Gi
 * per GPU). Node 32 cores / 128Gi / 4 GPUs, nothing used; a 1-GPU pod of
 * 4 cores / 16Gi strands nothing (28 cores and 112Gi feed the 3 GPUs
 * left), so the waste term is 0. spreadGpu 0.05: 50 + 0.05 * 50 * (28/32
 * + 112/128) = 54.375 wherever the node is. spreadGpu 0: 50, less 1e-10
 * per slot, so the earlier of two equal nodes wins (first fit). A
 * CPU-only pod keeps spread (0.05) either way. */
Test(score, fragment_spread_gpu_exact)
{
    hnode h;
    hnode_init(&h, 32000, 128 * FX_GI, 4);
    model_pod *pod = fx_pod("g", "g", 4000, 16 * FX_GI);
    fx_pod_gpu(&reg, pod, 1, 0);
    model_pod *cpu_pod = fx_pod("c", "c", 4000, 16 * FX_GI);
    static const char *const yaml[] = {"strategy: fragment\nfragment:\n  spreadGpu: 0.05\n",
                                       "strategy: fragment\nfragment:\n  spreadGpu: 0\n"};
    for (int i = 0; i < 2; i++) {
        score_policy *p = fx_policy(&reg, yaml[i]);
        h.cn.slot = 0;
        double first = score_node(p, pod, &h.cn);
        double cpu_first = score_node(p, cpu_pod, &h.cn);
        h.cn.slot = 7;
        double later = score_node(p, pod, &h.cn);
        double cpu_later = score_node(p, cpu_pod, &h.cn);
        if (i == 0) {
            cr_assert_float_eq(first, 54.375, 1e-12);
            cr_assert(later == first);
        } else {
            cr_assert_float_eq(first, 50.0, 1e-12);
            cr_assert_float_eq(later, 50.0 - 7e-10, 1e-13);
            cr_assert_gt(first, later);
        }
        /* CPU-only: 28 cores feed 3.5 GPUs of 4, so 500 milli stranded
         * (before 0), and spread over the surplus (spreadSurplus, whose
         * test below has the figures). */
        cr_assert_float_eq(cpu_first, 47.8125, 1e-9);
        cr_assert(cpu_later == cpu_first);
        score_policy_unref(p);
    }
    model_pod_free(pod);
    model_pod_free(cpu_pod);
    model_node_free(h.spec);
}

/* fragment's spreadSurplus, exact values with the priors (8 cores and 32Gi
 * per GPU; fewer than 20 pods seen, so g = 1). Node 32 cores / 128Gi / 4
 * free GPUs, CPU-only pod 4 cores / 16Gi: 28 cores and 112Gi feed 3500 of
 * the 4000 milli, so dW = 500 (-1.5625). Spread over free CPU and memory:
 * 0.05 * 50 * (28/32 + 112/128) = 4.375; over the surplus beyond the free
 * GPUs' need (32 cores, 128Gi): 0.05 * 50 * (-4/32 - 16/128) = -0.625.
 * A node without GPUs spreads by its free fraction either way. */
Test(score, fragment_spread_surplus_exact)
{
    hnode h, c;
    hnode_init(&h, 32000, 128 * FX_GI, 4);
    hnode_init(&c, 32000, 128 * FX_GI, 0);
    model_pod *pod = fx_pod("c", "c", 4000, 16 * FX_GI);
    static const struct {
        const char *yaml;
        double want;
    } cases[] = {{"strategy: fragment\nfragment:\n  spreadSurplus: false\n", 52.8125},
                 {"strategy: fragment\nfragment:\n  spreadSurplus: true\n", 47.8125}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        score_policy *p = fx_policy(&reg, cases[i].yaml);
        cr_assert_float_eq(score_node(p, pod, &h.cn), cases[i].want, 1e-9, "%s: %f", cases[i].yaml,
                           score_node(p, pod, &h.cn));
        cr_assert_float_eq(score_node(p, pod, &c.cn), 54.375, 1e-9);
        score_policy_unref(p);
    }
    model_pod_free(pod);
    model_node_free(h.spec);
    model_node_free(c.spec);
}

/* fragment's spreadCpu, exact values: 20 pods observed, 4 cores each, k
 * of them CPU-only, so c (the CPU-only pods' share of the CPU demand) is
 * k/20. CPU-only pod 4 cores / 16Gi on a node without GPUs (32 cores /
 * 128Gi): unblended 50 + 0.05 * 50 * (28/32 + 112/128) = 54.375. At
 * spreadCpu 1, with k = 15, c = 0.75 and the excess 2c - 1 = 0.5 blends
 * half toward least-allocated on CPU: 0.5 * 54.375 + 0.5 * 100 * 28/32 =
 * 70.9375 (at spreadCpu 2 the blend is whole: 87.5). With k = 10 (c =
 * 0.5) or fewer, or spreadCpu 0 (the default), the score is fragment's
 * own. */
Test(score, fragment_spread_cpu_exact)
{
    hnode c;
    hnode_init(&c, 32000, 128 * FX_GI, 0);
    model_pod *pod = fx_pod("c", "c", 4000, 16 * FX_GI);
    model_pod *gpod = fx_pod("g", "g", 4000, 16 * FX_GI);
    fx_pod_gpu(&reg, gpod, 1, 0);
    static const struct {
        const char *yaml;
        int cpu_only;
        double want;
    } cases[] = {
        {"strategy: fragment\nfragment:\n  spreadCpu: 1\n", 15, 70.9375},
        {"strategy: fragment\nfragment:\n  spreadCpu: 2\n", 15, 87.5},
        {"strategy: fragment\nfragment:\n  spreadCpu: 0\n", 15, 54.375},
        {"strategy: fragment\n", 15, 54.375},
        {"strategy: fragment\nfragment:\n  spreadCpu: 1\n", 10, 54.375},
        {"strategy: fragment\nfragment:\n  spreadCpu: 1\n", 5, 54.375},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        score_policy *p = fx_policy(&reg, cases[i].yaml);
        cr_assert_float_eq(score_node(p, pod, &c.cn), 54.375, 1e-9, "nothing observed yet");
        for (int n = 0; n < 20; n++)
            score_observe_pod(p, n < cases[i].cpu_only ? pod : gpod);
        double got = score_node(p, pod, &c.cn);
        cr_assert_float_eq(got, cases[i].want, 1e-9, "%s, %d CPU-only: %f", cases[i].yaml,
                           cases[i].cpu_only, got);
        score_policy_unref(p);
    }
    model_pod_free(pod);
    model_pod_free(gpod);
    model_node_free(c.spec);
}

/* Before anything is learned a GPU pod goes to the node with 24 free cores
 * (at the prior 8 cores per GPU it strands less there). Once CPU-only pods
 * ask for most of the CPU (c = 240 / 260 cores; the GPU pods' 2 cores per
 * GPU learned, so neither node strands), at spreadCpu 1 it goes to the
 * node with more free CPU; by default (0) to the first in the cache's
 * order (first fit). */
Test(score, fragment_spread_cpu_gpu_pod)
{
    hnode a, b;
    hnode_init(&a, 64000, 256 * FX_GI, 4);
    hnode_init(&b, 64000, 256 * FX_GI, 4);
    a.cn.slot = 0;
    b.cn.slot = 1;
    hnode_use(&a, 40000, 0);
    model_pod *pod = fx_pod("c", "c", 8000, 16 * FX_GI);
    model_pod *gpod = fx_pod("g", "g", 2000, 8 * FX_GI);
    fx_pod_gpu(&reg, gpod, 1, 0);
    for (int spread = 0; spread <= 1; spread++) {
        score_policy *p = fx_policy(&reg, spread ? "strategy: fragment\nfragment:\n  spreadCpu: 1\n"
                                                 : "strategy: fragment\n");
        double fa = score_node(p, gpod, &a.cn), fb = score_node(p, gpod, &b.cn);
        cr_assert_gt(fa, fb, "before learning: %f %f", fa, fb);
        for (int n = 0; n < 40; n++)
            score_observe_pod(p, n % 4 ? pod : gpod);
        fa = score_node(p, gpod, &a.cn);
        fb = score_node(p, gpod, &b.cn);
        if (spread)
            cr_assert_gt(fb, fa, "spread over CPU: %f %f", fa, fb);
        else
            cr_assert_gt(fa, fb, "first fit: %f %f", fa, fb);
        score_policy_unref(p);
    }
    model_pod_free(pod);
    model_pod_free(gpod);
    model_node_free(a.spec);
    model_node_free(b.spec);
}

/* fragment prefers: a CPU-only node for CPU-only pods over a GPU node it
 * would strand; the partly used GPU for a share that fits it. */
Test(score, fragment_preferences)
{
    hnode cpu_node, gpu_node;
    hnode_init(&cpu_node, 32000, 128 * FX_GI, 0);
    hnode_init(&gpu_node, 32000, 128 * FX_GI, 4);
    model_pod *cpu_pod = fx_pod("c", "c", 16000, 32 * FX_GI);
    cr_assert_gt(score(SCORE_FRAGMENT, cpu_pod, &cpu_node),
                 score(SCORE_FRAGMENT, cpu_pod, &gpu_node));

    hnode fresh, partial;
    hnode_init(&fresh, 32000, 128 * FX_GI, 4);
    hnode_init(&partial, 32000, 128 * FX_GI, 4);
    partial.cn.gpu_used[2] = 600;
    partial.cn.requested[MODEL_RES_CPU] = 4000;
    partial.cn.requested[MODEL_RES_MEMORY] = 8 * FX_GI;
    model_pod *share = fx_pod("s", "s", 2000, 4 * FX_GI);
    fx_pod_gpu(&reg, share, 1, 400);
    double sf = score(SCORE_FRAGMENT, share, &fresh);
    double sp = score(SCORE_FRAGMENT, share, &partial);
    cr_assert_gt(sp, sf, "partial %f fresh %f", sp, sf);
    cr_assert(sp >= 0 && sp <= 100);
    model_pod_free(cpu_pod);
    model_pod_free(share);
    model_node_free(cpu_node.spec);
    model_node_free(gpu_node.spec);
    model_node_free(fresh.spec);
    model_node_free(partial.spec);
}

Test(score, scores_stay_in_range)
{
    hnode h;
    hnode_init(&h, 1000, FX_GI, 8);
    hnode_use(&h, 5000, 5 * FX_GI); /* overcommitted by someone else */
    for (int i = 0; i < 8; i++)
        h.cn.gpu_used[i] = 1000;
    model_pod *pod = fx_pod("p", "p", 1000, FX_GI);
    fx_pod_gpu(&reg, pod, 8, 0);
    for (int s = 0; s < SCORE__COUNT; s++) {
        double v = score((score_strategy)s, pod, &h);
        cr_assert(v >= 0 && v <= 100 && isfinite(v), "%s: %f",
                  score_strategy_name((score_strategy)s), v);
    }
    model_pod_free(pod);
    model_node_free(h.spec);
    /* Huge quantities (the model allows up to int64) do not overflow. */
    hnode_init(&h, INT64_MAX, INT64_MAX, 2);
    hnode_use(&h, INT64_MAX / 2, INT64_MAX / 3);
    pod = fx_pod("q", "q", INT64_MAX, INT64_MAX);
    fx_pod_gpu(&reg, pod, 1, 500);
    for (int s = 0; s < SCORE__COUNT; s++) {
        double v = score((score_strategy)s, pod, &h);
        cr_assert(v >= 0 && v <= 100 && isfinite(v), "%s: %f",
                  score_strategy_name((score_strategy)s), v);
    }
    model_pod_free(pod);
    model_node_free(h.spec);
}

Test(score, extender_mapping)
{
    score_policy *p = NULL;
    cr_assert_eq(score_policy_new_default(&reg, &p), AS_OK);
    cr_assert_eq(score_to_extender(p, 0), 0);
    cr_assert_eq(score_to_extender(p, 100), 10);
    cr_assert_eq(score_to_extender(p, 54.9), 5);
    cr_assert_eq(score_to_extender(p, 55), 6);
    cr_assert_eq(score_to_extender(p, -3), 0);
    cr_assert_eq(score_to_extender(p, 140), 10);
    score_policy_unref(p);
    const char *yaml = "extender: {maxScore: 100, scoreMin: 40, scoreMax: 60, rounding: floor}\n";
    p = fx_policy(&reg, yaml);
    cr_assert_eq(score_to_extender(p, 50), 50);
    cr_assert_eq(score_to_extender(p, 45.99), 29);
    cr_assert_eq(score_to_extender(p, 39), 0);
    cr_assert_eq(score_to_extender(p, 61), 100);
    /* the batch: each as alone, negatives (infeasible) and NaN to 0 */
    const double in[] = {-1, 0, 39, 40, 45.99, 50, 59.5, 60, 61, 1e9, NAN};
    enum { N = sizeof in / sizeof in[0] };
    int8_t out[N];
    score_to_extender_n(p, in, N, out);
    for (size_t i = 0; i < N; i++)
        cr_assert_eq(out[i], in[i] >= 0 ? score_to_extender(p, in[i]) : 0, "score %g", in[i]);
    score_policy_unref(p);
}

Test(score, agent_pods)
{
    score_policy *p = NULL;
    cr_assert_eq(score_policy_new_default(&reg, &p), AS_OK);
    model_pod *a = fx_pod("a", "a", 1, 1);
    cr_assert(score_policy_is_agent_pod(p, a));
    a->scheduler_name = "default-scheduler";
    cr_assert_not(score_policy_is_agent_pod(p, a));
    score_policy_unref(p);
    const char *yaml = "agentPods:\n  schedulerNames: [fast]\n  labels: {kind: agent}\n";
    p = fx_policy(&reg, yaml);
    cr_assert_not(score_policy_is_agent_pod(p, a));
    fx_labels_set(a->pool, &a->labels, "kind", "agent");
    cr_assert(score_policy_is_agent_pod(p, a));
    a->scheduler_name = "fast";
    a->labels.n = 0;
    cr_assert(score_policy_is_agent_pod(p, a));
    cr_assert_float_eq(score_policy_soft_shard_bonus(p), 50.0, 1e-9);
    score_policy_unref(p);
    model_pod_free(a);
}

/* Learned popularity: after observing many 500-milli shares, fgd scores a
 * 500-milli share onto a free-500 device above one that would leave 500
 * free on a fresh device. */
Test(score, fgd_learns_shapes)
{
    score_policy *p = NULL;
    cr_assert_eq(score_policy_new_strategy(&reg, SCORE_FGD, &p), AS_OK);
    model_pod *share = fx_pod("s", "s", 1000, FX_GI);
    fx_pod_gpu(&reg, share, 1, 500);
    for (int i = 0; i < 200; i++)
        score_observe_pod(p, share);
    hnode half, fresh;
    hnode_init(&half, 32000, 64 * FX_GI, 1);
    half.cn.gpu_used[0] = 500;
    hnode_init(&fresh, 32000, 64 * FX_GI, 1);
    /* half: F 0 -> 0 (no idle GPU left): 50. fresh: F 0 -> 0 (500 free
     * still fits the 500 share): 50. Equal; add a 600 shape to separate. */
    model_pod *s600 = fx_pod("t", "t", 1000, FX_GI);
    fx_pod_gpu(&reg, s600, 1, 600);
    for (int i = 0; i < 200; i++)
        score_observe_pod(p, s600);
    /* Now fresh: after placing, 500 free < 600 -> F grows by .5*500. */
    cr_assert_gt(score_node(p, share, &half.cn), score_node(p, share, &fresh.cn));
    model_pod_free(share);
    model_pod_free(s600);
    model_node_free(half.spec);
    model_node_free(fresh.spec);
    score_policy_unref(p);
}

typedef struct race_arg {
    score_policy *p;
    model_pod *pod;
    const cache_node *node;
    int bad; /* scores out of range (asserted on the main thread) */
} race_arg;

static void *observer(void *arg)
{
    race_arg *a = arg;
    for (int i = 0; i < 3000; i++) {
        a->pod->req.v[MODEL_RES_CPU] = 1000 + (i % 50) * 100;
        score_observe_pod(a->p, a->pod);
    }
    return NULL;
}

static void *scorer(void *arg)
{
    race_arg *a = arg;
    for (int i = 0; i < 3000; i++) {
        double v = score_node(a->p, a->pod, a->node);
        if (!(v >= 0 && v <= 100))
            a->bad++;
    }
    return NULL;
}

/* Observing (learning) while other threads score is safe (run under TSan);
 * the observed pods are pinned to the scored node's GPU model, so the
 * model table is rebuilt while it is read. */
Test(score, observe_while_scoring)
{
    for (int s = SCORE_FGD; s <= SCORE_FRAGMENT; s++) {
        score_policy *p = NULL;
        cr_assert_eq(score_policy_new_strategy(&reg, (score_strategy)s, &p), AS_OK);
        hnode h;
        hnode_init(&h, 32000, 64 * FX_GI, 2);
        uint64_t cg[3] = {100, 50, 50000};
        cache_gpu_model t4 = {.name = "T4", .devices = 10, .free_milli = 5000};
        h.cn.cluster_gpus = cg;
        h.cn.gpu_model = &t4;
        model_pod *wp = fx_pod("w", "w", 1000, FX_GI);
        fx_pod_gpu(&reg, wp, 1, 300);
        fx_pod_affinity_in(wp, "agentsched.io/gpu-model", "T4");
        model_pod *rp = fx_pod("r", "r", 1000, FX_GI);
        fx_pod_gpu(&reg, rp, 1, 300);
        race_arg w = {p, wp, &h.cn, 0}, r = {p, rp, &h.cn, 0};
        pthread_t t1, t2;
        pthread_create(&t1, NULL, observer, &w);
        pthread_create(&t2, NULL, scorer, &r);
        pthread_join(t1, NULL);
        pthread_join(t2, NULL);
        cr_assert_eq(r.bad, 0);
        model_pod_free(wp);
        model_pod_free(rp);
        model_node_free(h.spec);
        score_policy_unref(p);
    }
}

/* Per-device accounting: a 600-milli share cannot span two GPUs
 * that have 400 free each, through the real cache, predicates and sched. */
Test(score, share_cannot_span_devices)
{
    cache *c = NULL;
    cr_assert_eq(cache_new(&reg, &c), AS_OK);
    model_node *n = fx_node("g", 32000, 64 * FX_GI, 110);
    fx_node_gpus(&reg, n, 2);
    cr_assert_eq(cache_node_upsert(c, n), AS_OK);
    for (int i = 0; i < 2; i++) {
        char name[8];
        snprintf(name, sizeof name, "u%d", i);
        model_pod *u = fx_pod(name, name, 1000, FX_GI);
        fx_pod_gpu(&reg, u, 1, 600);
        fx_pod_bind(u, "g");
        cr_assert_eq(cache_pod_upsert(c, u), AS_OK);
        model_pod_free(u);
    }
    model_pod *pod = fx_pod("p", "p", 1000, FX_GI);
    fx_pod_gpu(&reg, pod, 1, 600);
    cache_read_lock(c);
    const cache_node *cn = cache_node_find(c, "g", 1);
    cr_assert_eq(cache_node_gpu_used(cn, 0), 600);
    cr_assert_eq(cache_node_gpu_used(cn, 1), 600);
    uint32_t dev = 0;
    cr_assert_not(pred_gpu_choose(pod, cn, &dev));
    cr_assert_eq(pred_check(&reg, CACHE_SHARD_NONE, pod, cn).code, PRED_INSUFFICIENT_GPU);
    /* 400 still fits, on one device. */
    model_pod *small = fx_pod("s", "s", 1000, FX_GI);
    fx_pod_gpu(&reg, small, 1, 400);
    cr_assert(pred_gpu_choose(small, cn, &dev));
    cr_assert(dev == 1u || dev == 2u);
    cache_read_unlock(c);

    score_policy *p = NULL;
    cr_assert_eq(score_policy_new_default(&reg, &p), AS_OK);
    sched_request rq = {.pod = pod, .policy = p, .k = 1};
    sched_result r;
    sched_result_init(&r);
    cr_assert_eq(sched_evaluate(c, &rq, &r), AS_OK);
    cr_assert_eq(r.ncand, 0);
    sched_result_free(&r);
    score_policy_unref(p);
    model_pod_free(pod);
    model_pod_free(small);
    cache_free(c);
}

/* fragment takes the waste after a whole-GPU pod from the waste before's
 * device terms (whole devices going from free to used change no partly
 * used one): it must equal the full recount to the bit. A policy with
 * multiGpu 1e-300 recounts every device for such a pod, its own term far
 * below a score's precision; both score random node states alike. */
Test(score, fragment_whole_gpu_waste_from_parts)
{
    static const char *const yaml[] = {
        "strategy: fragment\nfragment:\n  reserve: 0\n",
        "strategy: fragment\nfragment:\n  reserve: 0\n  multiGpu: 1e-300\n"};
    score_policy *p[2] = {NULL, NULL};
    model_pod *seen[3] = {fx_pod("s1", "s1", 4000, 16 * FX_GI), fx_pod("s2", "s2", 6000, 8 * FX_GI),
                          fx_pod("s3", "s3", 16000, 64 * FX_GI)};
    fx_pod_gpu(&reg, seen[0], 1, 300);
    fx_pod_gpu(&reg, seen[1], 1, 550);
    fx_pod_gpu(&reg, seen[2], 2, 0);
    for (int i = 0; i < 2; i++) {
        p[i] = fx_policy(&reg, yaml[i]);
        for (int k = 0; k < 30; k++)
            score_observe_pod(p[i], seen[k % 3]);
    }
    model_pod *pods[3] = {fx_pod("w1", "w1", 8000, 32 * FX_GI), fx_pod("w2", "w2", 2000, 4 * FX_GI),
                          fx_pod("w4", "w4", 24000, 96 * FX_GI)};
    fx_pod_gpu(&reg, pods[0], 1, 0);
    fx_pod_gpu(&reg, pods[1], 2, 0);
    fx_pod_gpu(&reg, pods[2], 4, 0);
    hnode h;
    hnode_init(&h, 64000, 256 * FX_GI, 8);
    unsigned seed = 11;
    int compared = 0;
    for (int round = 0; round < 500; round++) {
        hnode_use(&h, rand_r(&seed) % 64000, (int64_t)(rand_r(&seed) % 256) * FX_GI);
        for (int i = 0; i < 8; i++) {
            int r = rand_r(&seed) % 3;
            h.cn.gpu_used[i] = r == 0 ? 0 : r == 1 ? MODEL_GPU_MILLI : rand_r(&seed) % 1000;
        }
        for (int k = 0; k < 3; k++) {
            double a = score_node(p[0], pods[k], &h.cn), b = score_node(p[1], pods[k], &h.cn);
            cr_assert_eq(a, b, "round %d pod %d: %.17g against %.17g", round, k, a, b);
            compared += a > 0;
        }
    }
    cr_assert_gt(compared, 500);
    for (int k = 0; k < 3; k++) {
        model_pod_free(pods[k]);
        model_pod_free(seen[k]);
    }
    score_policy_unref(p[0]);
    score_policy_unref(p[1]);
    model_node_free(h.spec);
}

/* fragment keeps a node's waste before the pod between scans: a second
 * score of an unchanged node (the memo's) equals the first, and once a
 * pod lands the score follows the node's new usage, as a copy of the node
 * that is never memoized (id 0) scores it. */
Test(score, fragment_memo_follows_the_node)
{
    cache *c = NULL;
    cr_assert_eq(cache_new(&reg, &c), AS_OK);
    model_node *n = fx_node("g", 32000, 64 * FX_GI, 110);
    fx_node_gpus(&reg, n, 4);
    cr_assert_eq(cache_node_upsert(c, n), AS_OK);
    score_policy *p = NULL;
    cr_assert_eq(score_policy_new_strategy(&reg, SCORE_FRAGMENT, &p), AS_OK);
    /* a share, a CPU-only pod (its waste after comes from the memo's
     * parts, no device read) and a whole GPU */
    model_pod *pods[3] = {fx_pod("p", "p", 2000, 4 * FX_GI), fx_pod("c", "c", 3000, 4 * FX_GI),
                          fx_pod("w", "w", 2000, 4 * FX_GI)};
    fx_pod_gpu(&reg, pods[0], 1, 300);
    fx_pod_gpu(&reg, pods[2], 1, 0);
    for (int round = 0; round < 3; round++) {
        cache_read_lock(c);
        const cache_node *cn = cache_node_find(c, "g", 1);
        cr_assert(cn && cn->id != 0);
        cache_node copy = *cn;
        copy.id = 0;
        for (int k = 0; k < 3; k++) {
            double first = score_node(p, pods[k], cn);
            double again = score_node(p, pods[k], cn);
            double fresh = score_node(p, pods[k], &copy);
            cr_assert_eq(first, again, "round %d pod %d", round, k);
            cr_assert_eq(first, fresh, "round %d pod %d", round, k);
        }
        cache_read_unlock(c);
        /* a 700 share lands on a device: the waste before changes */
        char name[8];
        snprintf(name, sizeof name, "u%d", round);
        model_pod *u = fx_pod(name, name, 1000, FX_GI);
        fx_pod_gpu(&reg, u, 1, 700);
        fx_pod_bind(u, "g");
        cr_assert_eq(cache_pod_upsert(c, u), AS_OK);
        model_pod_free(u);
    }
    score_policy_unref(p);
    for (int k = 0; k < 3; k++)
        model_pod_free(pods[k]);
    cache_free(c);
}

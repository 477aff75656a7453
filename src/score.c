/*
 * score.c - TEMPORARY minimal scoring (most-allocated over cpu and memory)
 * so the decision core links; the [scoring] work replaces this file.
 */
#include "agentsched/score.h"

#include <stdlib.h>
#include <string.h>

struct score_policy {
    int refs; /* atomic */
    score_strategy strategy;
};

static const char *const strategy_names[SCORE__COUNT] = {
    "least-allocated", "most-allocated", "balanced-allocation", "best-fit", "fgd", "fragment",
};

/* See score.h. */
as_err score_strategy_parse(const char *name, score_strategy *out)
{
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

/* See score.h. */
as_err score_policy_new_strategy(model_registry *reg, score_strategy s, score_policy **out)
{
    score_policy *p = calloc(1, sizeof *p);
    if (!p)
        return AS_ENOMEM;
    p->refs = 1;
    p->strategy = s;
    *out = p;
    return AS_OK;
}

/* See score.h. */
as_err score_policy_new_default(model_registry *reg, score_policy **out)
{
    return score_policy_new_strategy(reg, SCORE_MOST_ALLOCATED, out);
}

/* See score.h. */
as_err score_policy_load(model_registry *reg, const char *path, score_policy **out, as_diag *diag)
{
    return as_diag_set(diag, AS_EUNSUPPORTED, NULL, "%s: policy files are not supported yet",
                       path);
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
    if (p && __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free(p);
}

/* See score.h. */
score_strategy score_policy_strategy(const score_policy *p)
{
    return p->strategy;
}

/* See score.h. */
bool score_policy_is_agent_pod(const score_policy *p, const model_pod *pod)
{
    return pod->scheduler_name && strcmp(pod->scheduler_name, "agent-scheduler") == 0;
}

/* See score.h. */
double score_policy_soft_shard_bonus(const score_policy *p)
{
    return 50.0;
}

/* See score.h. */
double score_node(const score_policy *p, const model_pod *pod, const cache_node *node)
{
    static const int res[] = {MODEL_RES_CPU, MODEL_RES_MEMORY};
    double sum = 0;
    int n = 0;
    for (size_t i = 0; i < sizeof res / sizeof res[0]; i++) {
        int r = res[i];
        int64_t alloc = node->spec->alloc.v[r];
        if (alloc <= 0)
            continue;
        int64_t used = cache_node_requested(node, r) + pod->req.v[r];
        if (used > alloc)
            used = alloc;
        double frac = (double)used * 100.0 / (double)alloc;
        sum += p->strategy == SCORE_LEAST_ALLOCATED ? 100.0 - frac : frac;
        n++;
    }
    return n ? sum / n : 0.0;
}

/* See score.h. */
void score_observe_pod(score_policy *p, const model_pod *pod)
{
}

/* See score.h. */
int score_to_extender(const score_policy *p, double score)
{
    int s = (int)(score / 10.0 + 0.5);
    return s < 0 ? 0 : s > 10 ? 10 : s;
}

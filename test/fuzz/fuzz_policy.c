/* fuzz_policy.c - libFuzzer target for the policy loader: any input either
 * yields a policy that scores a node within [0, 100] or a clean error with
 * a message; the second half of the input doubles as CSV for the trace
 * reader. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/cmd/replay.h"
#include "agentsched/core/policy.h"
#include "agentsched/core/score.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    model_registry reg;
    model_registry_init(&reg);
    score_policy *p = NULL;
    as_diag d = {{0}, {0}};
    as_err err = score_policy_parse(&reg, "fuzz.yaml", (const char *)data, size, &p, &d);
    if (err == AS_OK) {
        if (!p)
            abort();
        /* A tiny node and pod: scoring must stay in range for any policy. */
        model_node spec;
        memset(&spec, 0, sizeof spec);
        spec.name = "n";
        spec.alloc.v[MODEL_RES_CPU] = 4000;
        spec.alloc.v[MODEL_RES_MEMORY] = (int64_t)8 << 30;
        spec.alloc.v[MODEL_RES_PODS] = 110;
        spec.ngpus = 2;
        spec.ready = true;
        cache_node cn;
        memset(&cn, 0, sizeof cn);
        cn.spec = &spec;
        cn.gpu_used[1] = 600;
        model_pod pod;
        memset(&pod, 0, sizeof pod);
        pod.name = "p";
        pod.req.v[MODEL_RES_CPU] = 1000;
        pod.req.v[MODEL_RES_MEMORY] = (int64_t)1 << 30;
        pod.req.v[MODEL_RES_PODS] = 1;
        pod.gpu_count = 1;
        pod.gpu_milli = 300;
        score_observe_pod(p, &pod);
        double s = score_node(p, &pod, &cn);
        if (!(s >= 0 && s <= 100))
            abort();
        int e = score_to_extender(p, s);
        (void)e;
        score_policy_unref(p);
    } else if (p || !d.msg[0]) {
        abort();
    }
    /* Same bytes as a node list and a pod list. */
    trace *t = NULL;
    size_t half = size / 2;
    err = trace_parse("nodes.csv", (const char *)data, half, "pods.csv", (const char *)data + half,
                      size - half, &t, &d);
    if (err == AS_OK)
        trace_free(t);
    else if (t)
        abort();
    model_registry_destroy(&reg);
    return 0;
}

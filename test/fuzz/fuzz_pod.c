/* fuzz_pod.c - libFuzzer target: YAML/JSON text -> model_pod, then the
 * matchers over the decoded pod. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/doc.h"
#include "agentsched/model/labels.h"
#include "agentsched/model/pod.h"
#include "agentsched/model/registry.h"
#include "fuzz_registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[] = {"nvidia.com/gpu", "example.com/foo", NULL};
    model_registry *reg = fuzz_registry_once(names);
    json_t *v = NULL;
    if (doc_parse((const char *)data, size, false, &v, NULL) != AS_OK)
        return 0;
    model_pod *p = NULL;
    as_diag d;
    as_err err = model_pod_from_json(reg, v, &p, &d);
    json_decref(v);
    if (err != AS_OK) {
        if (p || !d.msg[0])
            abort();
        return 0;
    }
    if (p->req.v[MODEL_RES_PODS] != 1 || p->gpu_milli > MODEL_GPU_MILLI || !p->name[0] || !p->ns ||
        !p->scheduler_name)
        abort();
    for (int r = 0; r < MODEL_MAX_RES; r++) {
        if (p->req.v[r] < 0 || ((p->req.v[r] != 0) != !!(p->req_mask & (1u << r))))
            abort();
    }
    for (uint32_t i = 1; i < p->labels.n; i++) {
        if (strcmp(p->labels.items[i - 1].key, p->labels.items[i].key) >= 0)
            abort();
    }
    (void)model_affinity_matches(&p->affinity, p->name, &p->labels);
    (void)model_affinity_matches(&p->affinity, "node-1", &p->node_selector);
    model_taint taint = {"dedicated", "batch", MODEL_EFFECT_NO_SCHEDULE};
    for (uint32_t i = 0; i < p->ntolerations; i++)
        (void)model_toleration_matches(&p->tolerations[i], &taint);
    (void)model_pod_is_terminal(p);
    model_pod_free(p);
    return 0;
}

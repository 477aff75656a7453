/* fuzz_node.c - libFuzzer target: YAML/JSON text -> model_node, and the
 * same text as a cluster snapshot. A fresh registry per input keeps runs
 * independent. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/doc.h"
#include "agentsched/base/log.h"
#include "agentsched/model/cluster.h"
#include "agentsched/model/node.h"
#include "agentsched/model/registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        log_set_level(LOG_ERROR);
        ready = 1;
    }
    json_t *v = NULL;
    if (doc_parse((const char *)data, size, true, &v, NULL) != AS_OK)
        return 0;
    model_registry reg;
    model_registry_init(&reg);
    model_node *n = NULL;
    as_diag d;
    as_err err = model_node_from_json(&reg, json_array_get(v, 0), &n, &d);
    if (err == AS_OK) {
        if (!n || !n->name[0] || n->ngpus > MODEL_MAX_GPUS)
            abort();
        for (uint32_t i = 1; i < n->labels.n; i++) {
            if (strcmp(n->labels.items[i - 1].key, n->labels.items[i].key) >= 0)
                abort();
        }
        for (int r = 0; r < MODEL_MAX_RES; r++) {
            if (n->alloc.v[r] < 0 || n->capacity.v[r] < 0)
                abort();
        }
        if (model_registry_count(&reg) > MODEL_MAX_RES)
            abort();
        model_node_free(n);
    } else if (n || !d.msg[0]) {
        abort();
    }
    model_cluster *c = NULL;
    if (model_cluster_from_json(&reg, v, &c, &d) == AS_OK) {
        if (!c)
            abort();
        model_cluster_free(c);
    } else if (c) {
        abort();
    }
    json_decref(v);
    model_registry_destroy(&reg);
    return 0;
}

/*
 * cluster.h - a snapshot of Nodes and Pods read from a file (embedded
 * mode).
 */
#ifndef AGENTSCHED_MODEL_CLUSTER_H
#define AGENTSCHED_MODEL_CLUSTER_H

#include <jansson.h>
#include <stddef.h>

#include "agentsched/base/error.h"
#include "agentsched/model/node.h"
#include "agentsched/model/pod.h"
#include "agentsched/model/registry.h"

typedef struct model_cluster {
    model_node **nodes; /* owned */
    size_t nnodes;
    model_pod **pods; /* owned */
    size_t npods;
} model_cluster;

/*
 * model_cluster_from_json decodes a Kubernetes List (kind List, NodeList,
 * PodList; `items` of Node and Pod objects) or a single Node/Pod. Other
 * kinds in items are skipped. Duplicate node names are an error. Errors
 * name the item: field "items[3].status.allocatable.cpu", msg naming the
 * object. Caller owns *out (model_cluster_free).
 */
as_err model_cluster_from_json(model_registry *reg, const json_t *doc, model_cluster **out,
                               as_diag *diag);

/*
 * model_cluster_load reads a YAML or JSON file (exactly what
 * `kubectl get nodes,pods -A -o yaml|json` prints; multi-document YAML
 * is concatenated) through doc_load_file and decodes it as above. The
 * diag message names the file.
 */
as_err model_cluster_load(model_registry *reg, const char *path, model_cluster **out,
                          as_diag *diag);

/* model_cluster_free frees the snapshot and every object in it. NULL ok. */
void model_cluster_free(model_cluster *c);

#endif

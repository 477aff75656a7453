/*
 * node.h - a decoded v1 Node.
 *
 * The decoder turns a Node's JSON (jansson DOM) into a flat struct whose
 * strings and arrays live in one pool, so a node is freed with a single
 * call and never shares memory with the JSON it came from.
 */
#ifndef AGENTSCHED_MODEL_NODE_H
#define AGENTSCHED_MODEL_NODE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "agentsched/base/error.h"
#include "agentsched/base/pool.h"
#include "agentsched/model/labels.h"
#include "agentsched/model/registry.h"

#define MODEL_MAX_GPUS 16 /* GPU devices per node */

typedef struct model_node {
    pool *pool; /* owns every pointer below */
    const char *name;
    const char *uid;              /* "" when absent */
    const char *resource_version; /* "" when absent */
    model_labels labels;
    const model_taint *taints;
    uint32_t ntaints;
    model_resvec alloc;    /* status.allocatable (capacity when absent) */
    model_resvec capacity; /* status.capacity */
    bool unschedulable;    /* spec.unschedulable */
    bool ready;            /* Ready condition is True (true when no conditions) */
    uint32_t ngpus;        /* devices: allocatable of reg->gpu_name, capped */
    const char *gpu_model; /* value of reg->gpu_model_label, or NULL */
} model_node;

/*
 * model_node_from_json decodes a v1 Node. Interns every extended resource
 * name in status.allocatable/capacity that has a non-zero amount into reg
 * (zero entries such as hugepages-1Gi: "0" would only use up slots); when
 * reg is full (AS_ELIMIT) or a name is too long, that resource is dropped
 * with a logged warning and the node still decodes. reg->gpu_share_name is
 * never a vector entry. ngpus is capped at MODEL_MAX_GPUS (warning; the
 * vector keeps the real count). A node with neither
 * allocatable nor capacity is an error (AS_EINVAL, field
 * "status.allocatable"). On success *out is owned by the caller
 * (model_node_free); on failure *out is NULL and diag says why.
 */
as_err model_node_from_json(model_registry *reg, const json_t *obj, model_node **out,
                            as_diag *diag);

/* model_node_free frees a node and its pool. NULL ok. */
void model_node_free(model_node *n);

#endif

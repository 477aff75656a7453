/*
 * shard_status.h - NodeShard writes (shard.volcano.sh/v1alpha1): the
 * coordinator's status merge patch and the controller's
 * spec.nodesDesired.
 */
#ifndef AGENTSCHED_K8S_SHARD_STATUS_H
#define AGENTSCHED_K8S_SHARD_STATUS_H

#include <jansson.h>
#include <stddef.h>

#include "agentsched/base/error.h"
#include "agentsched/k8s/transport.h"

/*
 * k8s_shard_patch_status merge-patches nodeshards/{name}/status with
 * status (borrowed JSON object: nodesInUse, nodesToRemove, nodesToAdd,
 * lastUpdateTime). AS_OK on 2xx; AS_ENOTFOUND on 404 (no such NodeShard or
 * CRD); AS_EAUTH on 401/403; AS_EHTTP otherwise; transport errors as
 * k8s_request.
 */
as_err k8s_shard_patch_status(k8s_client *k, const char *name, const json_t *status, as_diag *diag);

/*
 * k8s_shard_put_desired sets spec.nodesDesired of NodeShard name to
 * nodes[0..n) (a merge patch; the object is created with POST when it is
 * absent). Errors as k8s_shard_patch_status.
 */
as_err k8s_shard_put_desired(k8s_client *k, const char *name, const char *const *nodes, size_t n,
                             as_diag *diag);

#endif

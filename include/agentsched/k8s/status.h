/*
 * status.h - pod status conditions (PodScheduled=False for pods the fast
 * path cannot place), written as kube-scheduler writes them.
 */
#ifndef AGENTSCHED_K8S_STATUS_H
#define AGENTSCHED_K8S_STATUS_H

#include "agentsched/base/error.h"
#include "agentsched/k8s/transport.h"

/*
 * k8s_pod_set_condition sets one condition on pod ns/name with a strategic
 * merge patch of pods/{name}/status (conditions merge by type), as
 * kube-scheduler does for PodScheduled=False/Unschedulable. reason and
 * message may be NULL. Synchronous, rate-limited, private connection.
 * AS_OK on 2xx; AS_ENOTFOUND on 404; AS_EAUTH on 401/403; AS_EHTTP other
 * statuses; AS_EIO transport. diag says what happened.
 */
as_err k8s_pod_set_condition(k8s_client *k, const char *ns, const char *name, const char *type,
                             const char *status, const char *reason, const char *message,
                             as_diag *diag);

#endif

/*
 * skip.c - see skip.h. test_k8s_watch decodes a full pod and node with and
 * without these rules and compares the models.
 */
#include "agentsched/model/skip.h"

#include <stddef.h>

/* The rule layout is the JSON builder's (extargs.h). */
#include "agentsched/base/json.h"

static const char *const skip_meta[] = {"managedFields", "annotations", "ownerReferences", NULL};
/* The watch reads a pod's annotations for agentsched's own (gpuannot.h);
 * the one that can be big is left out. */
static const char *const skip_watch_meta[] = {"managedFields", "ownerReferences", NULL};
static const char *const skip_annotations[] = {"kubectl.kubernetes.io/last-applied-configuration",
                                               NULL};
/* The spec memo's key (model_skip_pod_spec_key) skips nodeName, carried
 * apart, and then what the decoders skip (skip_pod_spec, the rest). */
static const char *const skip_pod_spec_key[] = {"nodeName",
                                                "volumes",
                                                "ephemeralContainers",
                                                "readinessGates",
                                                "securityContext",
                                                "dnsConfig",
                                                "hostAliases",
                                                "imagePullSecrets",
                                                "topologySpreadConstraints",
                                                NULL};
#define skip_pod_spec (skip_pod_spec_key + 1)
static const char *const skip_container[] = {"command",
                                             "args",
                                             "env",
                                             "envFrom",
                                             "volumeMounts",
                                             "volumeDevices",
                                             "livenessProbe",
                                             "readinessProbe",
                                             "startupProbe",
                                             "lifecycle",
                                             "securityContext",
                                             "ports",
                                             NULL};
static const char *const skip_pod_status[] = {
    "conditions", "containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses",
    "podIPs",     "hostIPs",           "resourceClaimStatuses", NULL};
static const char *const skip_node_status[] = {
    "images",          "nodeInfo", "addresses", "daemonEndpoints", "volumesInUse",
    "volumesAttached", "config",   "features",  "runtimeHandlers", NULL};
static const json_skip pod_skip[] = {
    {"metadata", skip_meta},        {"spec", skip_pod_spec},
    {"containers", skip_container}, {"initContainers", skip_container},
    {"status", skip_pod_status},    {NULL, NULL},
};
static const json_skip pod_watch_skip[] = {
    {"metadata", skip_watch_meta},
    {"annotations", skip_annotations},
    {"spec", skip_pod_spec},
    {"containers", skip_container},
    {"initContainers", skip_container},
    {"status", skip_pod_status},
    {NULL, NULL},
};
static const json_skip pod_spec_key_skip[] = {
    {"spec", skip_pod_spec_key},
    {"containers", skip_container},
    {"initContainers", skip_container},
    {NULL, NULL},
};
static const json_skip node_skip[] = {
    {"metadata", skip_meta},
    {"status", skip_node_status},
    {NULL, NULL},
};
/* See skip.h. */
const struct json_skip *model_skip_pod(void)
{
    return pod_skip;
}

/* See skip.h. */
const struct json_skip *model_skip_pod_watch(void)
{
    return pod_watch_skip;
}

/* See skip.h. */
const struct json_skip *model_skip_pod_spec_key(void)
{
    return pod_spec_key_skip;
}

/* See skip.h. */
const struct json_skip *model_skip_node(void)
{
    return node_skip;
}

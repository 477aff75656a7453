/*
 * pod.h - a decoded v1 Pod, and Pod specs decoded once and shared.
 *
 * The decoder turns a Pod's JSON (jansson DOM) into a flat struct whose
 * strings and arrays live in one pool, so a pod is freed with a single
 * call and never shares memory with the JSON it came from.
 */
#ifndef AGENTSCHED_MODEL_POD_H
#define AGENTSCHED_MODEL_POD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"
#include "agentsched/base/pool.h"
#include "agentsched/model/labels.h"
#include "agentsched/model/registry.h"

#define MODEL_GPU_MILLI 1000 /* one whole GPU */

typedef enum model_phase {
    MODEL_PHASE_PENDING = 0, /* also when absent */
    MODEL_PHASE_RUNNING,
    MODEL_PHASE_SUCCEEDED,
    MODEL_PHASE_FAILED,
    MODEL_PHASE_UNKNOWN,
} model_phase;

/* Kubernetes' limits: a pod name is a DNS subdomain, a namespace a DNS
 * label. */
#define MODEL_POD_NAME_MAX  253
#define MODEL_NAMESPACE_MAX 63

/* The annotation the kubelet puts on a static pod's mirror. */
#define MODEL_MIRROR_ANNOTATION "kubernetes.io/config.mirror"

typedef struct model_pod {
    pool *pool;     /* owns every pointer below */
    const char *ns; /* "default" when absent */
    const char *name;
    const char *uid;              /* "" when absent */
    const char *resource_version; /* "" when absent */
    const char *node_name;        /* spec.nodeName, NULL when unbound */
    const char *scheduler_name;   /* "default-scheduler" when absent */
    /* Effective request as kube-scheduler computes it: max(sum(containers)
     * + sum(restartable init containers), each init container + the
     * restartable ones before it) + overhead. req.v[MODEL_RES_PODS] = 1. */
    model_resvec req;
    uint32_t req_mask; /* bit r set when req.v[r] != 0 */
    /* The sum of spec.containers' CPU requests alone (milli-CPU; limits
     * standing in for missing requests, as above): no init containers,
     * pod-level resources or overhead. What Volcano's sharding controller
     * counts of a pod (shardctl.h). */
    int64_t containers_cpu;
    const char *unknown_res; /* first requested resource no node has, or NULL */
    /* GPU demand: whole GPUs (count=k, milli=1000) or a share of one
     * (count=1, milli=reg->gpu_share_name's value, 1..1000). count=0: none.
     * Whole GPUs also stay in req.v[reg->gpu_res] (so vector accounting
     * counts devices); the share is not a vector entry. Asking for both, or
     * for a share above 1000, is a decode error. */
    uint32_t gpu_count;
    uint32_t gpu_milli;
    /* The devices agentsched wrote on the pod before binding it
     * (gpuannot.h): set only when agentsched.io/gpu-devices, gpu-milli and
     * gpu-node are all present and well formed (devices below
     * MODEL_MAX_GPUS), else 0, 0, NULL. Malformed ones are ignored, never a
     * decode error. */
    uint32_t annot_gpu_devices;
    uint32_t annot_gpu_milli;
    const char *annot_gpu_node;
    model_labels labels;
    model_labels node_selector;
    model_affinity affinity;
    const model_toleration *tolerations;
    uint32_t ntolerations;
    int32_t priority;
    model_phase phase;
    bool terminating;   /* metadata.deletionTimestamp set */
    bool mirror;        /* a static pod's mirror (annotation MODEL_MIRROR_ANNOTATION) */
    int64_t created_ms; /* metadata.creationTimestamp, ms since epoch; 0 if absent */
    /* A reference to the shared spec the spec-derived fields above point
     * into (model_pod_from_json_spec); NULL when the pod's pool owns them. */
    struct model_pod_spec *spec;
    /* The digest of the Pod text it was decoded from (podscan.h), set by
     * the watch; 0 when unknown. The cache keeps it with the pod's entry,
     * so that a later event with the same digest needs no decode. */
    uint64_t digest;
} model_pod;

/*
 * model_pod_from_json decodes a v1 Pod. Does not intern names: resources
 * unknown to reg with a non-zero request set unknown_res (also a GPU share
 * while no node has reg->gpu_name). Limits stand in for missing requests
 * (the API server's defaulting), pod-level spec.resources cpu/memory are
 * honoured. Malformed
 * quantities, selectors, or wrongly-typed fields are errors with the field
 * path in diag, and so are (AS_EINVAL) a metadata.name longer than
 * MODEL_POD_NAME_MAX or a metadata.namespace longer than
 * MODEL_NAMESPACE_MAX bytes, a string or map key that holds NUL, and an
 * empty resource name. Caller owns *out (model_pod_free).
 */
as_err model_pod_from_json(const model_registry *reg, const json_t *obj, model_pod **out,
                           as_diag *diag);

/* model_pod_free frees a pod and its pool, and drops its spec reference.
 * NULL ok. */
void model_pod_free(model_pod *p);

/*
 * model_pod_spec is what model_pod_from_json derives from a Pod's spec
 * alone (node name, scheduler name, priority, node selector, affinity,
 * tolerations, the effective request and GPU demand, unknown_res),
 * decoded once and shared, immutable and reference-counted, by pods whose
 * spec text is the same: agent pods of one template differ in metadata,
 * not in spec. The result depends on the registry's resources too, so a
 * spec records model_registry_count at its decode (generation) and is
 * valid only while the count is unchanged.
 */
typedef struct model_pod_spec model_pod_spec;

/*
 * model_pod_spec_from_json decodes spec (a v1 PodSpec object) against reg
 * as model_pod_from_json would inside a Pod. *out holds one reference
 * (model_pod_spec_unref). Errors as model_pod_from_json's, fields
 * starting "spec.".
 */
as_err model_pod_spec_from_json(const model_registry *reg, const json_t *spec, model_pod_spec **out,
                                as_diag *diag);

/* model_pod_spec_generation is model_registry_count when spec was decoded. */
int model_pod_spec_generation(const model_pod_spec *spec);

/* model_pod_spec_ref adds a reference (thread-safe); returns spec. */
model_pod_spec *model_pod_spec_ref(model_pod_spec *spec);

/* model_pod_spec_unref drops a reference, freeing the spec at the last
 * (thread-safe). NULL ok. */
void model_pod_spec_unref(model_pod_spec *spec);

/*
 * model_pod_from_json_spec is model_pod_from_json for a Pod whose spec was
 * decoded before into spec (borrowed; the pod takes its own reference):
 * obj's own "spec" member, if any, is not read. The result equals
 * model_pod_from_json's on the whole Pod when spec came from that Pod's
 * spec under the current registry generation; errors of kind, metadata
 * and status as model_pod_from_json's. Caller owns *out.
 */
as_err model_pod_from_json_spec(const model_registry *reg, const json_t *obj, model_pod_spec *spec,
                                model_pod **out, as_diag *diag);

/* Bytes a caller found in a document: not NUL-terminated; s NULL when the
 * member is absent or null. */
typedef struct model_span {
    const char *s;
    size_t len;
} model_span;

/*
 * The members of a Pod that model_pod_from_json_spec reads, taken out of
 * the Pod's JSON by a caller that scanned it itself (the extender's
 * request scanner), each a string without escapes: kind, metadata's name,
 * namespace, uid, resourceVersion, creationTimestamp, whether
 * deletionTimestamp is set, the labels (keys and values, in document
 * order), status.phase; and whether metadata.annotations holds what the
 * decoder reads there (agentsched's device annotations, the mirror
 * annotation), which these fields do not carry. node_name, when not
 * NULL, is spec.nodeName (a string without escapes, "" for none), which
 * then replaces the spec's: for a spec remembered less its nodeName
 * (model_skip_pod_spec_key).
 */
typedef struct model_pod_fields {
    model_span kind, name, ns, uid, resource_version, creation_timestamp, phase;
    bool deletion_timestamp;
    bool annotated;
    const model_span *node_name;
    const model_span *label_keys, *label_values;
    uint32_t nlabels;
} model_pod_fields;

/*
 * model_pod_from_fields is model_pod_from_json_spec for a Pod given as its
 * fields: the same pod when that decode would succeed. A Pod it would
 * refuse, or that these fields cannot stand for (a label key given twice:
 * the DOM keeps the last; f->annotated), is AS_EUNSUPPORTED with nothing
 * built: decode the Pod's JSON instead, which says what is wrong. Caller
 * owns *out.
 */
as_err model_pod_from_fields(const model_registry *reg, const model_pod_fields *f,
                             model_pod_spec *spec, model_pod **out);

/* model_pod_is_terminal: phase Succeeded or Failed (its resources are free). */
bool model_pod_is_terminal(const model_pod *p);

/*
 * model_pod_key is a pod's identity wherever pods are indexed (cache,
 * binder, queues): its uid, or "namespace/name" ("default" for a NULL
 * namespace) when the uid is empty, as for pods not read from the API
 * server. Returns pod->uid or tmp (filled, truncated to cap); *len (may be
 * NULL) gets the key's length. cap must be at least 1.
 */
const char *model_pod_key(const model_pod *pod, char *tmp, size_t cap, size_t *len);

/* model_pod_key_json is model_pod_key on a Pod's JSON before it is decoded
 * (an absent or empty namespace is "default", as the decoder has it),
 * written into out[0..len). */
void model_pod_key_json(const json_t *obj, char *out, size_t len);

#endif

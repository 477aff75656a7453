/*
 * model.h - compact Kubernetes object model: resources, Nodes, Pods.
 *
 * Decoders turn v1 Node / Pod JSON (jansson DOM) into flat C structs whose
 * strings and arrays live in one pool per object, so an object is freed with
 * a single call and never shares memory with the JSON it came from.
 *
 * Resources are dense vectors indexed through a model_registry: cpu, memory,
 * ephemeral-storage and pods have fixed indexes; extended resources
 * (nvidia.com/gpu, example.com/foo) are interned when a *node* advertises
 * them. A pod that requests a resource no node has gets `unknown_res` set
 * instead (it can fit nowhere), so hostile pods cannot fill the registry.
 *
 * Units: cpu in millicores, everything else in base units (bytes, count).
 */
#ifndef AGENTSCHED_MODEL_H
#define AGENTSCHED_MODEL_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"
#include "agentsched/base/pool.h"

#define MODEL_MAX_RES      16 /* distinct resource names, fixed ones included */
#define MODEL_MAX_GPUS     16 /* GPU devices per node */
#define MODEL_RES_NAME_MAX 128
#define MODEL_GPU_MILLI    1000 /* one whole GPU */

/* Fixed resource indexes. */
enum {
    MODEL_RES_CPU = 0,
    MODEL_RES_MEMORY = 1,
    MODEL_RES_EPHEMERAL = 2,
    MODEL_RES_PODS = 3,
    MODEL_RES_FIRST_EXTENDED = 4,
};

/* ------------------------------------------------------------------ */
/* Resource registry                                                   */
/* ------------------------------------------------------------------ */

/*
 * model_registry maps resource names to vector indexes and holds the GPU
 * configuration. Lookups are lock-free (names are written once, before `n`
 * is published with release order); interning takes `mu`. One per service.
 */
typedef struct model_registry {
    char names[MODEL_MAX_RES][MODEL_RES_NAME_MAX];
    int n;                             /* published count; access with __atomic */
    pthread_mutex_t mu;                /* serialises interning */
    int gpu_res;                       /* index of the whole-GPU resource, -1 until a node has it */
    char gpu_name[MODEL_RES_NAME_MAX]; /* default "nvidia.com/gpu" */
    char gpu_share_name[MODEL_RES_NAME_MAX];  /* default "agentsched.io/gpu-milli" */
    char gpu_model_label[MODEL_RES_NAME_MAX]; /* default "agentsched.io/gpu-model" */
} model_registry;

/* model_registry_init fills the fixed resources and GPU defaults. */
void model_registry_init(model_registry *reg);

/* model_registry_destroy releases the mutex. */
void model_registry_destroy(model_registry *reg);

/* model_registry_lookup returns the index of name[0..len) or -1. Lock-free. */
int model_registry_lookup(const model_registry *reg, const char *name, size_t len);

/* model_registry_intern returns the index of name, adding it if new.
 * AS_ELIMIT when MODEL_MAX_RES names exist already; AS_EINVAL if too long. */
as_err model_registry_intern(model_registry *reg, const char *name, size_t len, int *idx);

/* model_registry_count returns the number of names (acquire load). */
int model_registry_count(const model_registry *reg);

/* model_registry_name returns the name of index i (borrowed; valid forever). */
const char *model_registry_name(const model_registry *reg, int i);

/* ------------------------------------------------------------------ */
/* Quantities                                                          */
/* ------------------------------------------------------------------ */

/*
 * model_quantity_parse parses a Kubernetes quantity (s[0..len)): decimal SI
 * suffixes m k M G T P E, binary Ki Mi Gi Ti Pi Ei, exponents 1e3 / 1E-3,
 * fractions 0.5, optional sign. With milli=true the result is in
 * thousandths (cpu millicores), else in base units. Fractions round up in
 * magnitude (away from zero), as the API server's Value()/MilliValue() do
 * ("0.0001" cpu -> 1m, "100m" memory -> 1). Suffixes n and u are accepted
 * too (upstream does); "+", "." and "" are not (the grammar needs a digit).
 * Where the API server would silently cap a value at 2^63-1 this reports
 * AS_ERANGE.
 * Errors: AS_EPARSE (malformed, message in diag), AS_ERANGE (does not fit
 * int64). Negative values parse; callers decide if they are allowed.
 */
as_err model_quantity_parse(const char *s, size_t len, bool milli, int64_t *out, as_diag *diag);

/*
 * model_quantity_from_json accepts a JSON string quantity (surrounding
 * spaces trimmed, as the API server does) or a JSON number (YAML `cpu: 2`
 * arrives as an integer; a real is read through its shortest decimal text,
 * so 0.1 is 100m, not 101m) and parses it as above. JSON null is 0.
 */
as_err model_quantity_from_json(const json_t *v, bool milli, int64_t *out, as_diag *diag);

/* ------------------------------------------------------------------ */
/* Labels, taints, tolerations, affinity                               */
/* ------------------------------------------------------------------ */

typedef struct model_resvec {
    int64_t v[MODEL_MAX_RES];
} model_resvec;

typedef struct model_kv {
    const char *key;
    const char *value;
} model_kv;

/* A label set, sorted by key (strcmp) for binary search. */
typedef struct model_labels {
    const model_kv *items;
    uint32_t n;
} model_labels;

/* model_labels_get returns the value of key, or NULL if absent. */
const char *model_labels_get(const model_labels *l, const char *key);

typedef enum model_effect {
    MODEL_EFFECT_ALL = 0, /* only in tolerations: empty effect matches all */
    MODEL_EFFECT_NO_SCHEDULE,
    MODEL_EFFECT_PREFER_NO_SCHEDULE,
    MODEL_EFFECT_NO_EXECUTE,
} model_effect;

typedef struct model_taint {
    const char *key;
    const char *value; /* "" when absent */
    model_effect effect;
} model_taint;

/* LT/GT (TaintTolerationComparisonOperators): the taint's value compared
 * numerically with the toleration's, both base-10 int64; taint < / >
 * toleration. */
typedef enum model_tol_op {
    MODEL_TOL_EQUAL = 0,
    MODEL_TOL_EXISTS,
    MODEL_TOL_LT,
    MODEL_TOL_GT,
} model_tol_op;

typedef struct model_toleration {
    const char *key;   /* "" with EXISTS tolerates every key */
    const char *value; /* "" when absent */
    model_tol_op op;
    model_effect effect;
} model_toleration;

/* model_toleration_matches follows v1 Toleration.ToleratesTaint. */
bool model_toleration_matches(const model_toleration *t, const model_taint *taint);

typedef enum model_sel_op {
    MODEL_SEL_IN = 0,
    MODEL_SEL_NOT_IN,
    MODEL_SEL_EXISTS,
    MODEL_SEL_DOES_NOT_EXIST,
    MODEL_SEL_GT,
    MODEL_SEL_LT,
} model_sel_op;

typedef struct model_selector_req {
    const char *key;
    model_sel_op op;
    const char *const *values;
    uint32_t nvalues;
    int64_t num; /* parsed values[0] for GT/LT */
} model_selector_req;

/* One NodeSelectorTerm: all expressions AND all fields must match. */
typedef struct model_selector_term {
    const model_selector_req *exprs;
    uint32_t nexprs;
    const model_selector_req *fields; /* key is always "metadata.name" */
    uint32_t nfields;
} model_selector_term;

/* requiredDuringSchedulingIgnoredDuringExecution: terms are ORed. present=false
 * means no constraint; present with nterms==0 matches no node (as upstream). */
typedef struct model_affinity {
    bool present;
    const model_selector_term *terms;
    uint32_t nterms;
} model_affinity;

/* model_affinity_matches reports whether a node with this name and labels
 * satisfies the affinity (true when !present). */
bool model_affinity_matches(const model_affinity *a, const char *node_name,
                            const model_labels *node_labels);

/* ------------------------------------------------------------------ */
/* Node                                                                */
/* ------------------------------------------------------------------ */

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

/* ------------------------------------------------------------------ */
/* Pod                                                                 */
/* ------------------------------------------------------------------ */

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
    uint32_t req_mask;       /* bit r set when req.v[r] != 0 */
    const char *unknown_res; /* first requested resource no node has, or NULL */
    /* GPU demand: whole GPUs (count=k, milli=1000) or a share of one
     * (count=1, milli=reg->gpu_share_name's value, 1..1000). count=0: none.
     * Whole GPUs also stay in req.v[reg->gpu_res] (so vector accounting
     * counts devices); the share is not a vector entry. Asking for both, or
     * for a share above 1000, is a decode error. */
    uint32_t gpu_count;
    uint32_t gpu_milli;
    model_labels labels;
    model_labels node_selector;
    model_affinity affinity;
    const model_toleration *tolerations;
    uint32_t ntolerations;
    int32_t priority;
    model_phase phase;
    bool terminating;   /* metadata.deletionTimestamp set */
    int64_t created_ms; /* metadata.creationTimestamp, ms since epoch; 0 if absent */
    /* A reference to the shared spec the spec-derived fields above point
     * into (model_pod_from_json_spec); NULL when the pod's pool owns them. */
    struct model_pod_spec *spec;
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
 * order), status.phase.
 */
typedef struct model_pod_fields {
    model_span kind, name, ns, uid, resource_version, creation_timestamp, phase;
    bool deletion_timestamp;
    const model_span *label_keys, *label_values;
    uint32_t nlabels;
} model_pod_fields;

/*
 * model_pod_from_fields is model_pod_from_json_spec for a Pod given as its
 * fields: the same pod when that decode would succeed. A Pod it would
 * refuse, or that these fields cannot stand for (a label key given twice:
 * the DOM keeps the last), is AS_EUNSUPPORTED with nothing built: decode
 * the Pod's JSON instead, which says what is wrong. Caller owns *out.
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

/* ------------------------------------------------------------------ */
/* Cluster snapshot (embedded mode)                                    */
/* ------------------------------------------------------------------ */

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

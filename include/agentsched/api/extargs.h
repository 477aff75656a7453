/*
 * extargs.h - fast decoders of the kube-scheduler extender request bodies
 * (k8s.io/kube-scheduler/extender/v1).
 *
 * ExtenderArgs is decoded by a validating single-pass scanner (no DOM):
 * NodeNames are copied into the request pool as (ptr, len) names, full
 * Node items are kept as byte spans of the request body plus their
 * metadata.name (their other content is validated as JSON and skipped,
 * which is what makes full-Nodes requests cheap: ~2x faster than yajl
 * merely tokenizing them), and only the Pod subtree is built into a
 * jansson DOM, by the JSON layer's builder (json.h), for
 * model_pod_from_json. The binding and preemption arguments are small or
 * rare; they are built into a DOM with the same builder and read with
 * json_get.
 *
 * Wire rules, as Go's encoding/json applies them to these tag-less types:
 *   - keys are the Go field names, matched case-insensitively ("Pod",
 *     "pod", "POD"); NodeList / ObjectMeta keys ("items", "metadata",
 *     "name") likewise;
 *   - a repeated key: the last occurrence wins;
 *   - unknown keys are ignored; `null` means an unset pointer.
 * Values under keys agentsched does not read are validated as JSON but not
 * converted (a number too large for a double there is accepted, as Go
 * does for fields it has no struct member for).
 * Stricter than Go, on purpose: a wrongly-typed value is AS_EINVAL with
 * the field path in diag->field ("Pod", "NodeNames[3]",
 * "Nodes.items[2].metadata.name"), including `null` inside NodeNames and a
 * node item without metadata.name. Syntax errors (truncated JSON, invalid
 * UTF-8, NUL bytes, trailing garbage) are AS_EPARSE with the byte offset.
 * UTF-8 is checked strictly everywhere, in strings and keys, by every
 * decoder here (overlong forms, surrogates and code points past U+10FFFF
 * are invalid), so every string a DOM holds is valid UTF-8 and may be
 * echoed. A node name may not contain NUL (an escaped zero code point):
 * AS_EINVAL. Neither may any object key, so no consumer ever reads a key
 * that a C string would cut short: AS_EINVAL, in a DOM built here (the
 * Pod, binding and preemption args) naming the object
 * that holds it ("spec.nodeSelector"), elsewhere in ExtenderArgs with its
 * byte offset. String values may hold NUL; the
 * readers that need C strings reject it (model decoders, binding and
 * preemption fields).
 *
 * Caps: nesting depth JSON_MAX_DEPTH, EXTARGS_MAX_NAMES names/items,
 * EXTARGS_MAX_NAME_LEN bytes per node name, JSON_MAX_KEY_LEN per object
 * key; beyond them AS_ETOOBIG (AS_EINVAL for the name length) with the
 * field. Everything allocated lives in the caller's pool except the jansson
 * DOMs, which the decoded structs own (free with the _release functions).
 */
#ifndef AGENTSCHED_EXTARGS_H
#define AGENTSCHED_EXTARGS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"
#include "agentsched/base/json.h"
#include "agentsched/base/pool.h"
#include "agentsched/core/sched.h"

#define EXTARGS_MAX_NAMES    65536
#define EXTARGS_MAX_NAME_LEN 253 /* a DNS subdomain, as node names are */

/* One item of ExtenderArgs.Nodes.items. */
typedef struct extargs_node {
    sched_name name; /* metadata.name, not NUL-terminated, hash set: when it
                        points into the request body it is the text between
                        its quotes and had no escapes; else (escapes) it was
                        unescaped into the pool */
    const char *raw; /* the item's JSON text: points into the request body */
    size_t raw_len;
} extargs_node;

/*
 * ExtenderArgs. Names are de-duplicated (first occurrence kept, in input
 * order) both in NodeNames and in Nodes.items (by metadata.name).
 */
typedef struct extargs_args {
    json_t *pod;         /* owned; NULL when Pod is absent or null (or not yet
                            parsed: EXTARGS_LAZY_POD) */
    bool has_node_names; /* NodeNames present and not null */
    sched_name *names;   /* pool array; NodeNames, as extargs_node.name */
    size_t nnames;
    size_t dup_names;    /* duplicates dropped from NodeNames */
    bool has_nodes;      /* Nodes present and not null */
    extargs_node *nodes; /* pool; Nodes.items */
    size_t nnodes;
    size_t dup_nodes; /* duplicates dropped from Nodes.items */
    /* The Pod value's JSON text (validated), pointing into the request body;
     * NULL when Pod is absent or null. Keys a memo of work done for the
     * same Pod bytes. */
    const char *pod_raw;
    size_t pod_raw_len;
    /* The text of the Pod's top-level "spec" member when it is an object
     * (the last one, as in the DOM) and no top-level key of the Pod had an
     * escape; NULL otherwise. Points into the request body. Keys the
     * memo of decoded specs (model_pod_spec). */
    const char *pod_spec_raw;
    size_t pod_spec_len;
} extargs_args;

/*
 * extargs_decode_args decodes body[0..len) (need not be NUL-terminated but
 * must stay alive as long as *out: node raw spans and names point into
 * it). Arrays, and names that had escapes, go into p. On error *out is
 * released and zeroed and diag says why.
 */
as_err extargs_decode_args(pool *p, const char *body, size_t len, extargs_args *out, as_diag *diag);

/* extargs_decode_args_ex is extargs_decode_args with flags:
 * EXTARGS_LAZY_POD validates the Pod's JSON and records pod_raw but leaves
 * pod NULL until extargs_parse_pod builds the DOM (the caller may not need
 * it). */
#define EXTARGS_LAZY_POD 1u
as_err extargs_decode_args_ex(pool *p, const char *body, size_t len, unsigned flags,
                              extargs_args *out, as_diag *diag);

/* extargs_parse_pod builds a->pod from a->pod_raw when not built yet
 * (AS_OK with pod NULL when there is no Pod); errors as extargs_decode_args,
 * their fields inside the Pod prefixed "Pod" ("Pod.spec.nodeSelector").
 * skip (borrowed; NULL: the whole Pod) leaves members out of the DOM as
 * json_parse_skip does: kube-scheduler sends the whole Pod (env,
 * volumes, probes, status) in every filter and prioritize, and the pod
 * model reads a small part of it (model_skip_pod()). A DOM
 * built earlier (without EXTARGS_LAZY_POD) is kept as it is. The span was
 * validated by the decode, so it is only walked (json_parse_validated),
 * not validated again. */
as_err extargs_parse_pod(extargs_args *a, const json_skip *skip, as_diag *diag);

/*
 * extargs_pod_fields takes out of a's Pod span (validated by the decode;
 * the spec member, a->pod_spec_raw, is jumped over) the members
 * model_pod_from_fields reads: true with *f filled, its labels in
 * keys/values (room for cap), when each is the plain case: strings without
 * escapes, no escaped key, members of the types the pod model takes. false
 * otherwise, or when the span holds what the Pod's DOM builder may refuse
 * (json_iter_next): build the DOM then (extargs_parse_pod), which
 * decides. f's spans point
 * into the request body.
 */
bool extargs_pod_fields(const extargs_args *a, model_pod_fields *f, model_span *keys,
                        model_span *values, size_t cap);

/*
 * extargs_eval_names returns the set of node names a filter/prioritize
 * evaluates: NodeNames, followed by the names of Nodes.items not among
 * them (both are present only in odd requests, e.g. upstream's own test
 * example). No name occurs twice (the decoder de-duplicated both lists). *item_index (may be NULL
 * when there are no items) maps each Nodes item j to its index in *names. Arrays in p (or a->names
 * itself).
 */
as_err extargs_eval_names(pool *p, const extargs_args *a, sched_name **names, size_t *n,
                          size_t **item_index);

/* extargs_args_release frees the Pod DOM and zeroes a (pool memory stays). */
void extargs_args_release(extargs_args *a);

/* ExtenderBindingArgs; strings in the pool, "" when absent. */
typedef struct extargs_binding {
    const char *pod_name;
    const char *pod_namespace;
    const char *pod_uid;
    const char *node;
} extargs_binding;

/*
 * extargs_decode_binding decodes ExtenderBindingArgs. PodName and Node are
 * required (AS_EINVAL naming the field when missing or empty); PodNamespace
 * defaults to "default"; PodUID may be empty. A field holding NUL, a Node
 * longer than 253 bytes, a PodName longer than 253 or a PodNamespace longer
 * than 63 (Kubernetes' limits) is AS_EINVAL naming the field.
 */
as_err extargs_decode_binding(pool *p, const char *body, size_t len, extargs_binding *out,
                              as_diag *diag);

/* One entry of NodeNameToVictims / NodeNameToMetaVictims. */
typedef struct extargs_victims {
    const char *node;    /* pool */
    const char **uids;   /* pool; per victim, "" when the pod has none */
    const json_t **pods; /* full pods (NodeNameToVictims) borrowed from the
                            args' DOM; NULL for MetaVictims */
    size_t npods;
    int64_t num_pdb_violations;
} extargs_victims;

/*
 * ExtenderPreemptionArgs. When NodeNameToMetaVictims is present (the
 * nodeCacheCapable form) it is used; otherwise NodeNameToVictims. A null
 * entry counts as no victims.
 */
typedef struct extargs_preemption {
    json_t *doc;              /* owned: the whole request DOM */
    const json_t *pod;        /* borrowed from doc; NULL when absent/null */
    bool meta;                /* entries came from NodeNameToMetaVictims */
    extargs_victims *entries; /* pool */
    size_t nentries;
} extargs_preemption;

/*
 * extargs_decode_preemption decodes ExtenderPreemptionArgs (Pod may be
 * absent: pod NULL). Names and UIDs are copied into p, so body need not
 * outlive *out. AS_EINVAL / AS_ETOOBIG / AS_ENOMEM or a parse error with
 * diag naming the field (a node name or victim UID holding NUL, a negative
 * NumPDBViolations are AS_EINVAL); on error *out is already released and
 * zeroed.
 */
as_err extargs_decode_preemption(pool *p, const char *body, size_t len, extargs_preemption *out,
                                 as_diag *diag);
/* extargs_preemption_release drops a->doc (and so every pod borrowed from
 * it) and zeroes a; pool memory stays. Safe on a zeroed a; a not NULL. */
void extargs_preemption_release(extargs_preemption *a);

#endif

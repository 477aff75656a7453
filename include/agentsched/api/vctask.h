/*
 * vctask.h - the fast decoders of Volcano's predicate and prioritize
 * bodies, and the memo of the tasks' decoded Pods.
 *
 * Volcano sends, per pending task and per node it examines, the whole
 * TaskInfo (its v1 Pod included) and the whole NodeInfo (the v1 Node with
 * its status and images, Volcano's resource fields, image states): tens of
 * KB of which predicate needs the Pod and the node's Name. The scanners
 * here read such a body in one validating pass (jscan.h) without a DOM,
 * taking out the spans they need: task.Pod, node.Name, the Name of each
 * of prioritize's nodes. What the scan takes the DOM path would have
 * taken too, with one difference, on purpose and as Go's decoder and the
 * kube-scheduler extender's (extargs.h) have it: outside the task's Pod
 * (which is built into a DOM) a number too large for a double or an
 * object key over JSON_MAX_KEY_LEN is validated as JSON but not refused.
 *
 * The plain case. Every scanner answers false, and the caller decodes the
 * body with the DOM path (whose answer, errors included, is the
 * reference), unless the body is the shape vc-scheduler marshals: an
 * object; at each level read (the body, the task, the node, each node of
 * "nodes") no key with an escape, the wanted keys spelt exactly and at most
 * once (a key that matches one only case-insensitively, without the exact
 * one beside it, is not plain), the task's "Pod" an object, the node's
 * "Name" a non-empty string without escapes, "nodes" an array of objects
 * (or null/absent) of at most VCTASK_MAX_NODES. Anything else, including
 * every malformed body, is not plain.
 *
 * The memo. Volcano asks about the same task on node after node, and in
 * session after session while it is pending. vctask_pod decodes a task's
 * Pod span into a model pod and keeps it in a capped memo (VCTASK_MEMO_SLOTS
 * entries in sets of four chosen by a hash of the Pod's bytes; a new entry
 * takes its set's empty or least recently used way). An entry answers a later call only when the
 * Pod's bytes hash and length, the registry generation, and the Pod's metadata.uid and
 * metadata.resourceVersion as this request carries them are all the same: never across a changed
 * spec. A Pod without uid or resourceVersion is decoded afresh every time.
 *
 * The memo also remembers the NodeInfos the scanners validated (16,384 in
 * sets of four chosen by the Name of their first member, as Go marshals
 * a NodeInfo: its length, a hash of its bytes, the deepest it was
 * validated at): Volcano sends a node's NodeInfo byte for byte the same
 * for every task it asks about there, so a NodeInfo whose bytes hash as
 * the one seen with that Name, no deeper, is stepped over, not scanned.
 * The answer is the one the scan gives; malformed JSON can only be
 * stepped over as valid by a 64-bit hash collision with a valid NodeInfo
 * of the same Name and length.
 *
 * TaskInfo -> model_pod (vctask_task_pod): the embedded v1 Pod ("Pod") is
 * decoded with model_pod_from_json when present (it is in every real
 * session). Without it the request comes from "Resreq" in Volcano's units:
 * MilliCPU millicores, Memory bytes, ScalarResources name -> milli-units
 * (Volcano stores extended resources and ephemeral-storage as
 * Quantity.MilliValue(): 1 GPU = 1000), except "pods", which is a count and
 * is ignored (the pod itself counts one). Fractions round up. The pod's uid
 * is metadata.uid, else the task's "UID", else "namespace/name".
 * NodeInfo -> node name (vctask_node_name): "Name", else
 * "Node".metadata.name.
 */
#ifndef AGENTSCHED_VCTASK_H
#define AGENTSCHED_VCTASK_H

#include <stdbool.h>
#include <jansson.h>
#include <stddef.h>

#include "agentsched/base/error.h"
#include "agentsched/base/pool.h"
#include "agentsched/core/sched.h"
#include "agentsched/model/pod.h"
#include "agentsched/model/registry.h"

#define VCTASK_MEMO_SLOTS 256
#define VCTASK_MAX_NODES  65536

/* A task's Pod as a request carries it: spans into the body. uid / rv are
 * NULL when the Pod's metadata did not give them plainly. */
typedef struct vctask_pod_span {
    const char *pod;
    size_t pod_len;
    const char *uid, *rv;
    size_t uid_len, rv_len;
} vctask_pod_span;

typedef struct vctask_memo vctask_memo;

/* How a scan took its NodeInfos: stepped over as seen before, or scanned. */
typedef struct vctask_seen {
    size_t stepped, scanned;
} vctask_seen;

/* vctask_scan_predicate reads a PredicateRequest {"task", "node"}: true
 * with the task's Pod span and the node's Name (name/name_len, into the
 * body, not NUL-terminated) when the body is the plain case above. m
 * (NULL: none) lends its NodeInfos seen before (see the memo above);
 * *seen counts how the node was taken (also on false, up to where the
 * scan stopped). Thread-safe. */
bool vctask_scan_predicate(vctask_memo *m, const char *body, size_t len, vctask_pod_span *pod,
                           const char **name, size_t *name_len, vctask_seen *seen);

/* vctask_scan_prioritize reads a PrioritizeRequest {"task", "nodes"}: true
 * with the task's Pod span and the nodes' Names, de-duplicated (first
 * occurrence kept, in input order), in a pool array (*names, *n; names
 * point into the body, hash set as the cache's) when the body is the
 * plain case. false also when p runs out. m and *seen (every element of
 * "nodes", duplicates too) as for predicate. */
bool vctask_scan_prioritize(vctask_memo *m, pool *p, const char *body, size_t len,
                            vctask_pod_span *pod, sched_name **names, size_t *n, vctask_seen *seen);

/* vctask_memo_new builds an empty memo (AS_ENOMEM); vctask_memo_free
 * frees it (NULL ok; no vctask_pod may be outstanding). */
as_err vctask_memo_new(vctask_memo **out);
void vctask_memo_free(vctask_memo *m);

/* A decoded pod lent by the memo (or owned by the caller's handle alone
 * when it could not be remembered). */
typedef struct vctask_ent vctask_ent;

/*
 * vctask_pod returns the model pod of span (as vctask_task_pod decodes a
 * TaskInfo whose Pod is that object): from m when an entry matches (see
 * above; *hit true), else decoded (the Pod's DOM built without what the
 * pod model never reads, model_skip_pod) and remembered. AS_OK with
 * *pod (read-only, shared) and *ent (give it back with vctask_put);
 * otherwise an error (the Pod does not decode, or has no uid: the caller
 * takes the DOM path, which says why). Thread-safe.
 */
as_err vctask_pod(vctask_memo *m, const model_registry *reg, const vctask_pod_span *span,
                  const model_pod **pod, vctask_ent **ent, bool *hit);
void vctask_put(vctask_memo *m, vctask_ent *ent);

/*
 * vctask_task_pod decodes a TaskInfo object (borrowed) into a model pod as
 * described above. `field` names the task in diag paths ("task",
 * "evictees[2]"). Errors AS_EINVAL / AS_EPARSE / AS_ERANGE / AS_ENOMEM
 * with diag->field such as "task.Pod.spec.containers[0]..." or
 * "task.Resreq.MilliCPU". Caller owns *out (model_pod_free).
 */
as_err vctask_task_pod(const model_registry *reg, const json_t *task, const char *field,
                       model_pod **out, as_diag *diag);

/*
 * vctask_node_name returns the name of a NodeInfo object (borrowed from
 * it): "Name", else "Node".metadata.name. AS_EINVAL naming `field`.Name
 * when neither is a non-empty string (or either has the wrong type).
 */
as_err vctask_node_name(const json_t *node, const char *field, const char **name, as_diag *diag);

/* vctask_opt_string reads obj's optional string member key (Go's key
 * rules, json_get): "" when absent or null; AS_EINVAL naming field when it
 * is not a string, holds NUL or is not valid UTF-8. Borrowed from obj. */
as_err vctask_opt_string(const json_t *obj, const char *key, const char *field, const char **out,
                         as_diag *d);

#endif

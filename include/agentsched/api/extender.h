/*
 * extender.h - the kube-scheduler extender endpoints
 * (k8s.io/kube-scheduler/extender/v1 over HTTP).
 *
 * With `urlPrefix: http://HOST:PORT/scheduler` kube-scheduler POSTs to
 *   /scheduler/filter      ExtenderArgs           -> ExtenderFilterResult
 *   /scheduler/prioritize  ExtenderArgs           -> HostPriorityList
 *   /scheduler/bind        ExtenderBindingArgs    -> ExtenderBindingResult
 *   /scheduler/preempt     ExtenderPreemptionArgs -> ExtenderPreemptionResult
 * Every handler takes the extender (extender_new) as ctx and reads its
 * core's cache, binder and policy (core_policy_get). Request bodies are decoded by extargs.h (keys
 * are Go field names, matched case-insensitively); responses are written with buf.h directly, keys
 * exactly as Go's encoding/json prints these tag-less types (field order as declared upstream).
 *
 * FILTER. The evaluated set is NodeNames (nodeCacheCapable: true) or the
 * metadata.name of every Nodes item (nodeCacheCapable: false); both may be
 * sent (upstream's own example does), then both are answered. Duplicates
 * are evaluated once. Every node is evaluated by name against agentsched's
 * node cache, which is the source of truth for both modes: nodes in the
 * request that the cache lacks are failed with "node(s) were not found in
 * agentsched's node cache" and nothing from a request is upserted into the
 * cache (a Node object in a request carries no usage, and letting requests
 * write the cache would let any client change scheduling state).
 *   200 {"Nodes": null | {"metadata":{},"items":[<the passing items, echoed
 *        byte for byte from the request, in input order>]},
 *        "NodeNames": null | [<passing names, input order>],
 *        "FailedNodes": {name: reason, ... every rejected node},
 *        "FailedAndUnresolvableNodes": {name: reason, ... the rejected nodes
 *        no preemption can fix: pred_unresolvable()},
 *        "Error": ""}
 * An unresolvable node is listed in BOTH maps: upstream gives
 * FailedAndUnresolvableNodes precedence, and kube-scheduler releases that
 * predate that map still learn every reason from FailedNodes. "Error" is
 * always present and "" on success (upstream tests `Error != ""`; a Go
 * extender prints "Error":"" too). The evaluation is noted in the binder
 * (binder_note: the pod and the bind versions of the top candidates) so a
 * later bind can commit against what was seen.
 *
 * PRIORITIZE. 200 [{"Host": name, "Score": 0..10}, ...] for every
 * (de-duplicated) input node in input order: sched_evaluate with
 * score_all, mapped through score_to_extender and scaled, never clipped,
 * onto 0..10: the soft-shard bonus sched adds is compressed into the
 * policy's range, and a policy maxScore above 10 is scaled down to 10, so
 * nodes agentsched tells apart do not tie at 10. Nodes that do not fit (or
 * are unknown) score 0. kube-scheduler takes the score unclamped and
 * multiplies it by the extender's weight and by
 * MaxNodeScore/MaxExtenderPriority (10). Also noted in the binder
 * (replacing the filter's note), except when answered from the filter's
 * memo (below): then the filter's note for the same pod stands.
 *
 * BIND. First the authorization rules (agentsched binds with its own
 * cluster-wide pods/binding right, so only what kube-scheduler asked it to
 * decide): refused with 403 and {"error": msg, "field": "PodUID" or
 * "PodName", "Error": "agentsched refused to bind pod NS/NAME: <rule, what
 * to do>"}, nothing bound, counted in
 * agentsched_extender_bind_refused_total{rule} and logged with the
 * caller's address, unless
 *   not_filtered    the binder holds a note for the pod's key (PodUID, or
 *                   "namespace/name" when empty): agentsched answered its
 *                   filter or prioritize lately. Nothing is fetched from
 *                   the API server: an expired note, or one another replica
 *                   took, is refused and kube-scheduler retries the cycle.
 *   scheduler_name  the noted pod's schedulerName is in the core's
 *                   extender_names (--extender-scheduler-names). filter and
 *                   prioritize answer any pod but note only these, and
 *                   remember the last 256 others only to refuse
 *                   their binds under this rule.
 *   uid             in live mode PodUID is not empty (it goes into the
 *                   Binding's metadata.uid, which the API server checks
 *                   against the pod), and the note's pod is the request's
 *                   namespace/name.
 * A pod without a note that the cache already holds on Node (the note is
 * dropped on success) is answered 200 {"Error": ""} without any action, so
 * a retried bind stays idempotent; on another node it is a 200 refusal.
 * Then binder_bind_noted(key, Node). 200 {"Error": ""} when bound, also
 * when the pod is already bound to the same node; 200 {"Error": "<why>"}
 * when refused: bound elsewhere, the node changed and the pod no longer
 * fits, or the node is gone. In embedded mode (no API port live:
 * core_live) the bind is applied to the in-memory cluster: the pod stays
 * ASSUMED in the cache, which counts its usage exactly as a bound pod. In
 * live mode the bind posts the pods/binding subresource (the core's bind
 * port; on failure the assumed pod is released and Error says why).
 *
 * PREEMPT. 200 {"NodeNameToMetaVictims": {node: {"Pods":[{"UID":..}],
 * "NumPDBViolations": n}}}: the victims kube-scheduler proposed, per node,
 * minus the nodes agentsched knows cannot host the pod even after the
 * eviction: unknown to the cache, an unresolvable predicate failure
 * (taints, affinity, not ready, unschedulable, hard shard, unknown
 * resource), resources that stay insufficient with the victims removed,
 * or a node the policy would still keep from the pod (score_keeps). Each
 * victim the cache pod index holds on that node frees what the cache
 * charged for it there, with full victim Pods (NodeNameToVictims) and with
 * MetaVictims (UIDs only) alike: its requests (CPU, memory, one pod) and
 * the milli-GPU it holds on its own devices only (a 300-milli share frees
 * 300 on its device, a whole GPU its device); the pod must then find
 * devices by the cache's own choice (gpu_choose): a share one device with
 * room for all of it, whole GPUs fully free devices. A victim the cache
 * does not hold there frees nothing.
 * NumPDBViolations is carried through. Pod is required.
 *
 * ERRORS. A malformed body or a missing / wrongly-typed field (including
 * the Pod's own fields, decoded by model_pod_from_json; field "Pod.spec...")
 * is 400 with
 *   filter, bind:        {"error": msg, "field": path, "Error": msg}
 *   prioritize, preempt: {"error": msg, "field": path}
 * (the protocol's Error field exists only in the filter and bind results).
 * kube-scheduler treats any non-200 as a failed call (and skips the
 * extender if it is `ignorable`). Nesting/size caps (extargs.h) are also
 * 400; a request that exhausts its memory budget is 413; internal errors
 * are 500 with the same body shapes. In live mode, filter and prioritize
 * answer 503 (same shapes) until the node cache's first sync with the API
 * server, so kube-scheduler retries the pod instead of seeing every node
 * as "not found".
 */
#ifndef AGENTSCHED_EXTENDER_H
#define AGENTSCHED_EXTENDER_H

#include <stddef.h>

#include "agentsched/base/error.h"
#include "agentsched/base/http.h"
#include "agentsched/core/context.h"

#define EXTENDER_PATH_FILTER     "/scheduler/filter"
#define EXTENDER_PATH_PRIORITIZE "/scheduler/prioritize"
#define EXTENDER_PATH_BIND       "/scheduler/bind"
#define EXTENDER_PATH_PREEMPT    "/scheduler/preempt"

typedef struct extender extender;

/* extender_new builds the extender's state over core c (borrowed: must
 * outlive it) with its memos (extmemo.h), empty. AS_ENOMEM. Caller owns *out
 * (extender_free; NULL ok; no handler may still be running). */
as_err extender_new(core *c, extender **out);
void extender_free(extender *x);

/* The handlers of the four verbs (ctx is the extender *, borrowed): each writes
 * its whole answer, errors included, into resp with the statuses and bodies
 * described above; nothing is returned. Thread-safe: the HTTP workers call
 * them concurrently; call them with no cache lock held. */
void extender_handle_filter(void *ctx, const http_request *req, http_response *resp);
void extender_handle_prioritize(void *ctx, const http_request *req, http_response *resp);
void extender_handle_bind(void *ctx, const http_request *req, http_response *resp);
void extender_handle_preempt(void *ctx, const http_request *req, http_response *resp);

/* extender_routes returns the four verbs' routes (static; their ctx is
 * NULL: the server runs them with the extender from extender_new). */
const http_route *extender_routes(size_t *n);

#endif

/*
 * volcano.h - the Volcano scheduler extender endpoints (Volcano's
 * `extender` plugin, pkg/scheduler/plugins/extender).
 *
 * With `extender.urlPrefix: http://HOST:PORT/volcano` Volcano POSTs JSON to
 * /volcano/<verb>; any status other than 200 is an error to Volcano (and,
 * with `extender.ignorable: true`, silently ignored). Request keys are the
 * json tags of Volcano's request types ("task", "node", "nodes", "evictor",
 * "evictees", "job", "queue"); inside them TaskInfo / NodeInfo / Resource
 * carry no json tags, so their keys are Go field names ("Name", "Resreq",
 * "MilliCPU", ...). Keys are matched as Go decodes them: exactly first,
 * else case-insensitively (json_get). Unknown keys are ignored.
 *
 * VERBS AND ANSWERS (all 200 unless the body is malformed)
 *   onSessionOpen  {Jobs, Nodes, Queues, NamespaceInfo, RevocableNodes,
 *                  NodeList} (large). Validated by a streaming pass (no
 *                  DOM), which only counts the jobs and the session's nodes
 *                  and looks each node name up in the cache, logging the
 *                  ones agentsched does not know (a sign that the two
 *                  schedulers see different clusters). Volcano ignores the
 *                  answer; agentsched sends
 *                    {"jobs": J, "nodes": N, "unknownNodes": U}.
 *                  Its size is capped by the server's --max-body (413
 *                  beyond, which makes a non-ignorable Volcano skip every
 *                  verb for that session: raise the cap, or leave
 *                  onSessionOpenVerb unset: agentsched needs nothing from
 *                  it).
 *   onSessionClose {} -> {}.
 *   predicate      {"task": TaskInfo, "node": NodeInfo} ->
 *                  {"status": "", "code": 0} when the task fits the node in
 *                  agentsched's cache; otherwise {"status": reason, "code":
 *                  2 (Unschedulable) or 3 (UnschedulableAndUnresolvable,
 *                  pred_unresolvable())}. A node the cache lacks is code 3,
 *                  "node(s) were not found in agentsched's node cache".
 *                  Never a message with code 0 (Volcano turns that into
 *                  code 1, Error).
 *   prioritize     {"task", "nodes": [NodeInfo]} -> {"nodeScore": {name:
 *                  score}, "errorMessage": ""}: sched_evaluate's score in
 *                  [0, 100] (plus the soft-shard bonus) for nodes where the
 *                  task fits, 0 for the rest and for unknown nodes. Each
 *                  distinct name appears once.
 *   allocateFunc   {"task"} -> {"errorMessage": ""}: Volcano allocated the
 *                  task to task.NodeName (else task.Pod.spec.nodeName)
 *                  inside its session. agentsched marks the pod ASSUMED on
 *                  that node through the versioned binder (binder_commit,
 *                  always re-checked), so its own decisions (kube-scheduler
 *                  extender filter, fast path) see the capacity as taken.
 *                  Idempotent: the pod already on that node is success. A
 *                  pod ASSUMED on another node is moved (Volcano re-decided);
 *                  one BOUND elsewhere is refused. When the task does not
 *                  fit the node in agentsched's view, or the node is
 *                  unknown, errorMessage says why, and Volcano rolls the
 *                  allocation back (it collects AllocateFunc errors). A
 *                  task with Status Pipelined (4) waits for resources being
 *                  released and is not assumed (answer ""). A pod that got
 *                  GPU devices has them written on it (core_gpu_prebind,
 *                  live mode, the task's Pod uid and resourceVersion as
 *                  preconditions) before the answer; when that fails the
 *                  assumption is dropped and errorMessage says why, so
 *                  Volcano never binds it without them.
 *   deallocateFunc {"task"} -> {"errorMessage": ""}: forgets the ASSUMED
 *                  pod (any node). Idempotent: an unknown pod is success;
 *                  a BOUND pod (Volcano evicting a running task) is left to
 *                  the API server's deletion.
 *   preemptable, reclaimable {"evictor", "evictees"} -> {"status": 0,
 *                  "victims": []}: Abstain. Eviction policy (priorities,
 *                  queues, gangs) is Volcano's; agentsched has no opinion.
 *   jobEnqueueable {"job"} -> {"status": 0} (Abstain).
 *   jobEnqueued    {"job"} -> {}.
 *   queueOverused  {"queue"} -> {"overused": false} (agentsched keeps no
 *                  queue quotas; Volcano ORs the plugins' answers).
 *   jobReady       {"job"} -> {"status": true} (Volcano ANDs the plugins'
 *                  answers, so true is "no opinion"; gang decides).
 *
 * AUTHORIZATION. allocateFunc and deallocateFunc take or give back
 * capacity, so they act only on pods agentsched knows: in live mode the
 * ones its pod watch delivered, embedded the cluster file's, whose
 * schedulerName (from the watch or the file, never from the request) is
 * one of --volcano-scheduler-names (default "volcano"). deallocateFunc
 * drops only an assumption allocateFunc made for that UID (a capped set,
 * VOLCANO_MAX_ALLOCATED), never the fast path's or the extender's. An
 * allocation not confirmed within assumed_ttl_ms is forgotten (embedded:
 * checked on every Volcano request; live: the API client's expiry). A
 * refusal is HTTP 403 with {"error", "field", "errorMessage"}: a
 * non-ignorable Volcano fails the event (ignorable: it ignores the
 * answer; either way agentsched holds nothing for it); it is counted in
 * agentsched_volcano_refused_total{verb,rule} (rule unknown_pod,
 * scheduler_name, not_allocated) and logged with the caller's address.
 *
 * SHARDS. predicate, prioritize and allocateFunc judge Volcano's tasks
 * without agentsched's own shard (--shard-mode): Volcano offers only nodes
 * of its own shard (vc-scheduler's NodeShard) and enforces it itself, while
 * agentsched's shard restricts where agentsched places pods (kube-scheduler
 * extender, fast path, placement). An allocation therefore counts against
 * the node in every entry point's view, whichever shard owns it.
 *
 * TaskInfo -> model_pod and NodeInfo -> node name: vctask.h (vctask_task_pod,
 * vctask_node_name; predicate and prioritize read plain bodies with its
 * scanners, without a DOM, and remember the tasks' decoded Pods).
 *
 * ERRORS. A body that is not a JSON object, a missing or wrongly-typed
 * field, or a Pod that does not decode is 400 with {"error": msg, "field":
 * path} plus the verb's own error field: predicate adds "status": msg and
 * "code": 1, prioritize / allocateFunc / deallocateFunc add
 * "errorMessage": msg. Nesting beyond JSON_MAX_DEPTH is 400; a request
 * that exhausts its memory budget 413; internal errors 500, same shapes.
 */
#ifndef AGENTSCHED_VOLCANO_H
#define AGENTSCHED_VOLCANO_H

#include <jansson.h>
#include <stddef.h>

#include "agentsched/core/cache.h"
#include "agentsched/base/error.h"
#include "agentsched/base/http.h"
#include "agentsched/api/vctask.h"
#include "agentsched/core/context.h"
#include "agentsched/model/pod.h"
#include "agentsched/model/registry.h"

#define VOLCANO_PATH_ON_SESSION_OPEN  "/volcano/onSessionOpen"
#define VOLCANO_PATH_ON_SESSION_CLOSE "/volcano/onSessionClose"
#define VOLCANO_PATH_PREDICATE        "/volcano/predicate"
#define VOLCANO_PATH_PRIORITIZE       "/volcano/prioritize"
#define VOLCANO_PATH_PREEMPTABLE      "/volcano/preemptable"
#define VOLCANO_PATH_RECLAIMABLE      "/volcano/reclaimable"
#define VOLCANO_PATH_JOB_ENQUEUEABLE  "/volcano/jobEnqueueable"
#define VOLCANO_PATH_JOB_ENQUEUED     "/volcano/jobEnqueued"
#define VOLCANO_PATH_QUEUE_OVERUSED   "/volcano/queueOverused"
#define VOLCANO_PATH_JOB_READY        "/volcano/jobReady"
#define VOLCANO_PATH_ALLOCATE         "/volcano/allocateFunc"
#define VOLCANO_PATH_DEALLOCATE       "/volcano/deallocateFunc"

/* Volcano's predicate status codes (api.Success ...). */
enum {
    VOLCANO_CODE_SUCCESS = 0,
    VOLCANO_CODE_ERROR = 1,
    VOLCANO_CODE_UNSCHEDULABLE = 2,
    VOLCANO_CODE_UNRESOLVABLE = 3,
};

/* Volcano's TaskStatus bit for a pipelined task (api.Pipelined). */
#define VOLCANO_TASK_PIPELINED 4

/* The Volcano verbs' state: the pods the verbs may act on and the
 * allocations made through allocateFunc (see AUTHORIZATION above). */
typedef struct volcano volcano;

typedef struct volcano_config {
    /* an allocation not confirmed this long is forgotten (embedded mode;
     * in live mode the API client's assumed-pod expiry governs the cache);
     * 0 = VOLCANO_DEFAULT_TTL_MS */
    int64_t assumed_ttl_ms;
    size_t max_pods;      /* pods remembered; 0 = VOLCANO_MAX_PODS */
    size_t max_allocated; /* allocations remembered; 0 = VOLCANO_MAX_ALLOCATED */
} volcano_config;

#define VOLCANO_DEFAULT_TTL_MS 30000
#define VOLCANO_MAX_PODS       ((size_t)1 << 20)
#define VOLCANO_MAX_ALLOCATED  ((size_t)1 << 16)

/* volcano_new builds the verbs' state over core c (borrowed: must outlive
 * it); cfg may be NULL. AS_ENOMEM. Caller owns *out (volcano_free; NULL
 * ok; no handler may still be running). */
as_err volcano_new(core *c, const volcano_config *cfg, volcano **out);
void volcano_free(volcano *v);

/* volcano_pod_seen records what the pod watch (or the cluster file) says
 * of pod (borrowed): present, with its schedulerName, or gone (deleted).
 * Thread-safe; call with no cache lock held. */
void volcano_pod_seen(volcano *v, const model_pod *pod, bool deleted);

/* volcano_resync_begin / volcano_resync_end bracket a relist of every pod:
 * pods not seen again in between are forgotten. */
void volcano_resync_begin(volcano *v);
void volcano_resync_end(volcano *v);

/* volcano_expire forgets allocations made through allocateFunc before
 * now_ms - ttl (embedded mode: their assumed pods too); returns how many.
 * The verbs call it on every request. Thread-safe. */
size_t volcano_expire(volcano *v, int64_t now_ms);

/* The handlers (ctx is the volcano *, borrowed). */
void volcano_handle_on_session_open(void *ctx, const http_request *req, http_response *resp);
void volcano_handle_on_session_close(void *ctx, const http_request *req, http_response *resp);
void volcano_handle_predicate(void *ctx, const http_request *req, http_response *resp);
void volcano_handle_prioritize(void *ctx, const http_request *req, http_response *resp);
void volcano_handle_preemptable(void *ctx, const http_request *req, http_response *resp);
void volcano_handle_reclaimable(void *ctx, const http_request *req, http_response *resp);
void volcano_handle_job_enqueueable(void *ctx, const http_request *req, http_response *resp);
void volcano_handle_job_enqueued(void *ctx, const http_request *req, http_response *resp);
void volcano_handle_queue_overused(void *ctx, const http_request *req, http_response *resp);
void volcano_handle_job_ready(void *ctx, const http_request *req, http_response *resp);
void volcano_handle_allocate(void *ctx, const http_request *req, http_response *resp);
void volcano_handle_deallocate(void *ctx, const http_request *req, http_response *resp);

/* volcano_routes returns the handlers' routes (static; their ctx is NULL:
 * the server runs them with the volcano from volcano_new). */
const http_route *volcano_routes(size_t *n);

#endif

/*
 * placement.h - dry-run placement: "where would these pods go?"
 *
 * POST /v1/placements takes {"pods": [v1.Pod, ...], "candidates": K} and
 * answers {"placements": [...]}: for each pod in order, the node it would
 * get (or null), its top-K candidates with scores, and the per-reason counts
 * of the nodes that rejected it. Each later pod sees the earlier ones as
 * placed, yet NOTHING is written to the shared cache: the engine keeps a
 * private overlay (node incarnation -> extra requested vector and GPU
 * usage) that it adds on top of the cache's live usage while it evaluates.
 * Concurrent requests, binds and watches never see a dry run.
 *
 * The same engine serves the `agentsched place` CLI, offline (a private
 * service loaded from a cluster file) or against a running server.
 *
 * Decisions follow sched_evaluate: static predicates, then resources on the
 * node's usage plus the overlay, then score_node on that adjusted view;
 * candidates sorted by score descending, ties by node name; in soft shard
 * mode in-shard nodes get the policy's bonus and out-of-shard nodes are
 * only candidates when no in-shard node fits. A pod with spec.nodeName is
 * evaluated against that node only. Deterministic for a given cache state.
 */
#ifndef AGENTSCHED_PLACEMENT_H
#define AGENTSCHED_PLACEMENT_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "agentsched/base/buf.h"
#include "agentsched/core/cache.h"
#include "agentsched/core/context.h"
#include "agentsched/base/error.h"
#include "agentsched/base/http.h"
#include "agentsched/model/pod.h"
#include "agentsched/model/registry.h"
#include "agentsched/core/score.h"

#define PLACEMENT_DEFAULT_K 3
#define PLACEMENT_MAX_K     16   /* == SCHED_MAX_K */
#define PLACEMENT_MAX_PODS  5000 /* pods per request */
#define PLACEMENT_PATH      "/v1/placements"

/*
 * placement_run evaluates pods[0..npods) in order against cache c (read in
 * place, one read-lock bracket per pod) plus a private overlay of the pods
 * placed before, scoring with policy, and appends the response object
 * {"placements": [...]} to out. k is the number of candidates to report
 * (1..PLACEMENT_MAX_K). Nothing in c changes. Pods are borrowed.
 * AS_ENOMEM / AS_ETOOBIG (out's cap) on failure; an unplaceable pod is not
 * an error ("node": null, reasons filled).
 */
as_err placement_run(cache *c, const score_policy *policy, const model_pod *const *pods,
                     size_t npods, uint32_t k, buf *out);

/*
 * placement_request_decode validates a request DOM and decodes its pods
 * against reg (not interned: unknown resources make a pod unplaceable, not
 * an error). default_k is used when "candidates" is absent or null.
 * On success *pods (malloc'ed array of owned pods; free with
 * placement_pods_free), *npods and *k are set. On failure diag names the
 * field ("pods[2].spec.containers[0].resources.requests.cpu", "candidates")
 * and the error is AS_EINVAL / AS_EPARSE / AS_ERANGE / AS_ENOMEM.
 * Unknown fields are tolerated, as the Kubernetes API does.
 */
as_err placement_request_decode(const model_registry *reg, const json_t *req, uint32_t default_k,
                                model_pod ***pods, size_t *npods, uint32_t *k, as_diag *diag);

/* placement_pods_free frees an array from placement_request_decode. */
void placement_pods_free(model_pod **pods, size_t npods);

/*
 * placement_eval is the whole POST /v1/placements body -> response path:
 * parse body[0..len) as JSON, decode, run against co's cache and current
 * policy, append the response to out. Errors as placement_request_decode,
 * plus AS_EPARSE for malformed JSON (diag field empty).
 */
as_err placement_eval(core *co, const char *body, size_t len, buf *out, as_diag *diag);

/* placement_handle is the HTTP handler of POST /v1/placements (ctx: core *).
 * 200 with the response; 4xx/5xx with {"error", "field"}; 429 with a
 * Retry-After header when the caller is over its rate (see below). */
void placement_handle(void *ctx, const http_request *req, http_response *resp);

/*
 * Per-caller rate limit of POST /v1/placements. A dry run evaluates every
 * node for every pod of its body, so a caller looping on it would take the
 * CPU the extender verbs need; each caller (peer address) gets a token
 * bucket of qps tokens a second holding at most 2 x qps. Callers live in a
 * fixed table of PLACEMENT_LIMIT_SLOTS: a new caller takes the slot of the
 * least recently seen one among those its hash probes, so memory is fixed
 * however many addresses call.
 */
#define PLACEMENT_LIMIT_SLOTS 4096
#define PLACEMENT_DEFAULT_QPS 50
typedef struct placement_limiter placement_limiter;

/* placement_limiter_new makes a limiter of qps requests a second per
 * caller (burst 2 x qps); qps 0 = unlimited (*out is NULL, which
 * placement_limiter_take accepts). AS_ENOMEM. */
as_err placement_limiter_new(unsigned qps, placement_limiter **out);

/* placement_limiter_free frees l (NULL ok). */
void placement_limiter_free(placement_limiter *l);

/* placement_limiter_take spends one of peer's tokens at monotonic time
 * now_ns: true when it had one (always with a NULL l); false otherwise, with
 * *retry_after_s the whole seconds until it has one again (at least 1).
 * Thread-safe. */
bool placement_limiter_take(placement_limiter *l, const char *peer, uint64_t now_ns,
                            unsigned *retry_after_s);

/* placement_limit_configure replaces the limiter placement_handle consults
 * (process-wide; 0 = unlimited, the state before any call) by one of qps
 * per caller. Call it before serving: a limiter in use is not freed until
 * the next call or exit. AS_ENOMEM. */
as_err placement_limit_configure(unsigned qps);

/* placement_routes returns POST PLACEMENT_PATH (static; its ctx is NULL:
 * the server runs it with its core). */
const http_route *placement_routes(size_t *n);

/*
 * placement_print_table prints a placement response DOM (as answered by
 * placement_eval or a server) as a table: POD NODE SCORE CANDIDATES
 * REASONS. AS_EINVAL when resp does not have the documented shape.
 */
as_err placement_print_table(const json_t *resp, FILE *f);

#endif

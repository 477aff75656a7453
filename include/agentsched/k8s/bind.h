/*
 * bind.h - Bindings: synchronous on a bounded pool of keep-alive handles,
 * or queued for the bind workers, with retries that tell a refused bind
 * from one whose outcome is unknown; and a single-Pod GET.
 */
#ifndef AGENTSCHED_K8S_BIND_H
#define AGENTSCHED_K8S_BIND_H

#include <stdbool.h>
#include <stddef.h>

#include "agentsched/base/error.h"
#include "agentsched/k8s/transport.h"

/*
 * k8s_bind posts a Binding of pod ns/name (uid may be NULL or "") to node,
 * on one of cfg.bind_concurrency keep-alive connections (blocking while
 * all are busy). 201/200, or 409 "already assigned to node X" with X ==
 * node: AS_OK. 409 with another node: AS_ECONFLICT. 404: AS_ENOTFOUND.
 * 429/5xx/transport errors, and a 409 naming no node (etcd failed
 * mid-write), are retried (cfg.bind_retries times, with backoff; a
 * 429/503's Retry-After is waited out, up to 5 s) and then AS_EHTTP /
 * AS_EIO. When an attempt may have been applied unheard (the
 * connection broke after the request was sent, 504, or that 409), the
 * same binding is retried beyond that budget until an answer
 * settles it or cfg.assumed_ttl_ms / 2 has passed since the call began
 * (counted in bind_unknown), or since a try of the same binding (pod and
 * node) lost its answer, whose window the client remembers for the
 * k8s_bind that settles it. 401/403: AS_EAUTH. Other: AS_EHTTP. The
 * caller releases the assumed pod on failure. diag says what happened.
 * k NULL (a service without an API server binds in its cache only):
 * AS_EUNSUPPORTED.
 */
as_err k8s_bind(k8s_client *k, const char *ns, const char *name, const char *uid, const char *node,
                as_diag *diag);

/*
 * k8s_bind_try is one attempt of k8s_bind that never waits: for a free
 * handle, a rate-limiter token or before a retry, nor for an answer past
 * 250 ms. AS_EAGAIN (nothing lost) when every handle is busy, the rate
 * limiter has no token, or the answer is one k8s_bind would retry (429,
 * 5xx, a 409 naming no node, a broken connection, no answer in time);
 * the caller then binds with
 * k8s_bind, whose 201 or 409 naming this node also settles an attempt
 * that went through unheard, and which keeps to the same binding for
 * that attempt's unknown window even past its retry budget. Every other result as k8s_bind's. For a
 * thread that must not stall on the API server (the pod watch).
 */
as_err k8s_bind_try(k8s_client *k, const char *ns, const char *name, const char *uid,
                    const char *node, as_diag *diag);

/*
 * k8s_bind_try_send and k8s_bind_try_recv are k8s_bind_try in two steps,
 * for a thread that has other work while the API server answers (the pod
 * watch reads the binding's own event meanwhile): send takes a free
 * handle and a rate-limiter token without waiting and writes the
 * Binding, *sent the handle, which then carries nothing else; AS_EAGAIN
 * (*sent NULL) as k8s_bind_try's when nothing could be sent or a send
 * broke (then k8s_bind settles it), AS_EUNSUPPORTED when the client's
 * requests need libcurl (use k8s_bind_try), AS_EINVAL / AS_ENOMEM. recv
 * reads the answer (within 250 ms of the call), gives the handle back and
 * returns what k8s_bind_try would have; exactly one recv for each send
 * that succeeded, on any thread, one at a time. k8s_bind_try_answered:
 * recv would not wait for the answer's first bytes.
 */
as_err k8s_bind_try_send(k8s_client *k, const char *ns, const char *name, const char *uid,
                         const char *node, k8s_kept **sent, as_diag *diag);
as_err k8s_bind_try_recv(k8s_client *k, k8s_kept *sent, const char *ns, const char *name,
                         const char *uid, const char *node, as_diag *diag);
bool k8s_bind_try_answered(k8s_kept *sent);

/* Completion of an asynchronous bind (called on a bind worker thread). */
typedef void (*k8s_bind_done_fn)(void *arg, as_err err, const as_diag *diag);

/*
 * k8s_bind_async queues a bind (strings copied) for the bind workers;
 * done (may be NULL) gets the k8s_bind result. AS_ELIMIT when the queue is
 * full (the caller releases the pod), AS_EINVAL after stop.
 */
as_err k8s_bind_async(k8s_client *k, const char *ns, const char *name, const char *uid,
                      const char *node, k8s_bind_done_fn done, void *arg);

/*
 * k8s_patch_pod sends body (a JSON merge patch, e.g. gpuannot_patch_body's
 * with its metadata.uid / metadata.resourceVersion preconditions) to pod
 * ns/name. 200: AS_OK. 409 (the resourceVersion is not the pod's: it
 * changed since it was read) and 422 naming metadata.uid (the pod was
 * created again under its name): AS_ECONFLICT. 404: AS_ENOTFOUND.
 * 401/403: AS_EAUTH (the scheduler needs patch on pods). 429/5xx and
 * transport errors are retried (cfg.bind_retries times, with backoff; a
 * Retry-After is waited out, up to 5 s, as k8s_bind does), then
 * AS_EHTTP / AS_EIO; an attempt applied unheard makes its retry a
 * 409, so the caller sees a conflict and tries again with the pod as the
 * watch shows it. Other statuses: AS_EHTTP. k NULL: AS_EUNSUPPORTED.
 */
as_err k8s_patch_pod(k8s_client *k, const char *ns, const char *name, const char *body, size_t len,
                     as_diag *diag);

/* k8s_patch_status maps the HTTP status of a pod PATCH with
 * preconditions to k8s_patch_pod's result (the answer's body,
 * resp[0..len), is read for a 422's cause and the message); *retry is set
 * for the statuses k8s_patch_pod retries (429, 5xx: AS_EHTTP). diag names
 * pod ns/name. For k8s_patch_pod and its tests. */
as_err k8s_patch_status(long status, const char *resp, size_t len, const char *ns, const char *name,
                        bool *retry, as_diag *diag);

/* k8s_conflict_node extracts X from a 409 body/message "... is already
 * assigned to node \"X\"" into out; false when absent. */
bool k8s_conflict_node(const char *body, size_t len, char *out, size_t outlen);

/*
 * k8s_bind_keep_warm keeps cfg.bind_warm of the pool's connections open
 * (at most cfg.bind_concurrency; 0: does nothing), so that a burst of
 * Bindings does not begin with a TLS handshake per connection: free
 * handles without a connection, while fewer than bind_warm are open or in
 * use, are connected with a GET of /version, and free connections idle
 * for cfg.bind_warm_idle_ms (45 s) are sent one, before the API server's
 * idle timeout (90 s) closes them. At most 32 handles a call, least
 * recently used first; handles in use are never waited for. After a
 * failed GET the rest wait for the next call; the first failure after a
 * success is logged as a warning, the rest at debug. Does nothing when the
 * client's requests need libcurl's (basic auth). Returns the handles
 * warmed; counted in k8s_status (bind_warm_*). One caller at a time: the
 * client's housekeeping thread, while leading.
 */
size_t k8s_bind_keep_warm(k8s_client *k);

/* k8s_bind_init allocates the bind queue and cfg.bind_concurrency curl
 * handles (workers start on the first async bind); k8s_client_new calls it.
 * AS_ENOMEM. */
as_err k8s_bind_init(k8s_client *k);

/* k8s_bind_shutdown (stop flag up) wakes and joins the workers, fails
 * queued jobs with AS_EIO through their callbacks, waits for synchronous
 * binds to return their handles and frees everything; k8s_client_stop
 * calls it. */
void k8s_bind_shutdown(k8s_client *k);

#endif

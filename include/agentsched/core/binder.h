/*
 * binder.h - the versioned binder: optimistic concurrency that never
 * double-books a node.
 *
 * A decision (sched_evaluate) yields candidates tagged with the bind_version
 * each node had when it was evaluated. binder_commit tries them in order:
 *   unchanged bind_version          -> accept at once (BINDER_FAST)
 *   changed, pod still fits now     -> accept (BINDER_RECHECKED): the
 *                                      fine-grained check avoids the false
 *                                      conflicts of a pure version compare
 *   changed, no longer fits / gone  -> next candidate
 *   none left                       -> AS_ECONFLICT (caller requeues urgently)
 * Accepting marks the pod ASSUMED in the cache (bumping the node's
 * bind_version), so the very next decision sees the capacity as taken.
 * The API call (if any) is the caller's; on its failure call
 * binder_release.
 *
 * The binder also remembers, per pod uid, the pod and the bind versions it
 * saw in filter/prioritize (binder_note), because the extender `bind` verb
 * carries only the pod's name, namespace, uid and node. The memo is capped
 * (entries and age) and thread-safe.
 */
#ifndef AGENTSCHED_BINDER_H
#define AGENTSCHED_BINDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/core/cache.h"
#include "agentsched/model/pod.h"
#include "agentsched/core/sched.h"

typedef struct binder binder;

/* The memo's default byte cap: decoded pods are ~2-10 KB each, so the
 * 16384-pod cap binds first for real pods; this one for huge ones. */
#define BINDER_MEMO_DEFAULT_BYTES ((size_t)256 << 20)

typedef struct binder_config {
    size_t memo_max_pods;  /* default 16384 */
    int64_t memo_ttl_ms;   /* default 120000 */
    size_t memo_max_bytes; /* default BINDER_MEMO_DEFAULT_BYTES */
} binder_config;

typedef struct binder_stats {
    uint64_t accepted_fast;      /* bind_version unchanged */
    uint64_t accepted_rechecked; /* version changed but still fits */
    uint64_t idempotent;         /* already bound to the same node */
    uint64_t conflicts;          /* a candidate refused */
    uint64_t exhausted;          /* every candidate refused: requeue */
    uint64_t released;           /* binder_release calls (API bind failed) */
} binder_stats;

/* binder_new: c is borrowed and must outlive the binder. cfg may be NULL. */
as_err binder_new(cache *c, const binder_config *cfg, binder **out);
void binder_free(binder *b);

typedef enum binder_accept {
    BINDER_FAST = 0,
    BINDER_RECHECKED,
    BINDER_IDEMPOTENT,
} binder_accept;

typedef struct binder_outcome {
    int chosen; /* index into cands, -1 when none */
    binder_accept how;
    uint32_t gpu_devices; /* device bitmask taken on the chosen node */
    uint32_t gpu_milli;   /* milli-GPU on each of them (1000: whole); 0 without devices */
    char node[256];       /* chosen node name */
    /* the reserved pod's metadata.resourceVersion as agentsched saw it
     * ("" when unknown: a retried bind answered from the cache), the
     * precondition of the device annotation's patch */
    char resource_version[64];
    char reason[256]; /* why the last candidate was refused (on conflict) */
} binder_outcome;

/*
 * binder_commit tries cands[0..n) in order for pod (borrowed). AS_OK with
 * out->chosen >= 0 on acceptance; AS_ECONFLICT when the pod is already
 * bound elsewhere or every candidate was refused (out->reason says which).
 */
as_err binder_commit(binder *b, const model_pod *pod, const sched_candidate *cands, size_t n,
                     binder_outcome *out);

/* binder_release undoes an acceptance whose API bind failed (forgets the
 * assumed pod). */
as_err binder_release(binder *b, const char *uid);

/*
 * binder_note remembers pod (takes ownership; freed by the binder) and the
 * candidates evaluated for it (their node incarnations and bind versions,
 * copied; names are not read, so cands[i].name need not be valid any
 * more), replacing any earlier note for the same uid. Oldest notes are
 * evicted past the caps (pods and bytes: a note counts its own size and
 * the pod's pool footprint); a note bigger than a quarter of the byte cap
 * is refused (AS_ETOOBIG, pod freed). Takes no cache lock.
 */
as_err binder_note(binder *b, model_pod *pod, const sched_candidate *cands, size_t n);

/*
 * binder_bind_noted is the extender `bind` verb: look up the note for uid,
 * resolve node_name in the cache now, and commit with the bind version
 * noted for that node incarnation when it was a candidate, else with 0
 * (never equal: always rechecked). AS_ENOTFOUND when there is no note for
 * uid (pod never filtered, or evicted from the memo); AS_ECONFLICT as
 * binder_commit, or when node_name is not in the cache. The note is
 * dropped on success and kept for a retry otherwise.
 */
as_err binder_bind_noted(binder *b, const char *uid, const char *node_name, binder_outcome *out);

/* binder_noted_key: true if uid has a note; copies its "namespace/name"
 * into key (truncated to keylen). */
bool binder_noted_key(binder *b, const char *uid, char *key, size_t keylen);

/* binder_noted_pod: as binder_noted_key, and copies the noted pod's
 * schedulerName into sched ("" when it has none; truncated to schedlen). */
bool binder_noted_pod(binder *b, const char *uid, char *key, size_t keylen, char *sched,
                      size_t schedlen);

/* binder_get_stats copies the counters into *out (relaxed atomic loads:
 * each exact, not one snapshot together). No lock needed; thread-safe. */
void binder_get_stats(binder *b, binder_stats *out);

#endif

/*
 * watch.h - list+watch reflectors for Nodes, Pods and NodeShards, and the
 * incremental watch-event decoder they feed (exposed for the fuzz target
 * and the benchmark).
 *
 * CONSISTENCY
 *   Each reflector lists (limit/continue) inside a cache sync epoch, then
 *   watches from the list's resourceVersion with bookmarks. A dropped or
 *   corrupt stream resumes from the last applied resourceVersion; 410 Gone,
 *   an expired resourceVersion or an event too large for the line cap
 *   relists and reconciles (cache_sync_end_* removes what vanished).
 */
#ifndef AGENTSCHED_K8S_WATCH_H
#define AGENTSCHED_K8S_WATCH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"
#include "agentsched/core/cache.h"
#include "agentsched/k8s/transport.h"

/* One NodeShard (shard.volcano.sh/v1alpha1). Strings owned by the table
 * or by the copy returned from k8s_shards_copy. */
typedef struct k8s_shard {
    char *name;
    char *resource_version;
    char **nodes_desired;
    size_t n_desired;
    char **nodes_in_use;
    size_t n_in_use;
    char **nodes_to_remove;
    size_t n_to_remove;
    char **nodes_to_add;
    size_t n_to_add;
    char *last_update_time; /* NULL when absent */
    /* From metadata.managedFields (the apiserver's record, "" when absent):
     * the manager owning spec.nodesDesired and the time of its entry; the
     * manager of the newest status-subresource entry and its time. A manager
     * is the writer's fieldManager, by default its User-Agent up to '/'. */
    char desired_manager[64], desired_time[40];
    char status_manager[64], status_time[40];
} k8s_shard;

/* k8s_shard_managers fills the four managedFields fields of s from an
 * object's metadata.managedFields (borrowed; NULL or malformed: all ""). */
void k8s_shard_managers(const json_t *managed_fields, k8s_shard *s);

/* k8s_shards_copy copies the current NodeShard table (sorted by name).
 * Caller frees with k8s_shards_free. *n = 0 when the CRD is absent. */
as_err k8s_shards_copy(k8s_client *k, k8s_shard **out, size_t *n);
void k8s_shards_free(k8s_shard *shards, size_t n);

/* k8s_reflectors_start starts one reflector thread per kind (NodeShards
 * only with cfg.watch_shards); k8s_client_start calls it. AS_ENOMEM; what
 * started is left for k8s_reflectors_join. */
as_err k8s_reflectors_start(k8s_client *k);

/* k8s_reflectors_join joins and frees the reflectors; the stop flag must be
 * up first (it does not signal them). */
void k8s_reflectors_join(k8s_client *k);

typedef struct k8s_stream k8s_stream;

/*
 * k8s_stream_new makes a decoder for newline-delimited watch events of
 * kind, applying them to c (borrowed) with reg from the cache. max_line 0
 * = default. client may be NULL (no hooks, no shard table). Caller owns.
 */
as_err k8s_stream_new(k8s_kind kind, cache *c, k8s_client *client, size_t max_line,
                      k8s_stream **out);
void k8s_stream_free(k8s_stream *s);

/*
 * k8s_stream_feed consumes data[0..len) (any split), applying each
 * complete event. Returns AS_OK to continue; AS_EGONE on an ERROR event
 * with code 410 (relist); AS_ETOOBIG when a line exceeds max_line (relist:
 * an event is lost); AS_EPARSE on a line that is not a watch event
 * (reconnect from the last resourceVersion); AS_EHTTP on another ERROR
 * event. After an error the stream must be reset before reuse.
 */
as_err k8s_stream_feed(k8s_stream *s, const char *data, size_t len);

/* k8s_stream_reset drops any partial line and sets the resume
 * resourceVersion (NULL keeps it). */
void k8s_stream_reset(k8s_stream *s, const char *rv);

/*
 * k8s_stream_skip returns the rule table the stream and the list decode
 * objects of kind with: model_skip_node() or model_skip_pod() (skip.h),
 * the members the model never reads, left out of the tree; NULL (all
 * built) for NodeShards or an unknown kind. Static.
 */
const struct json_skip *k8s_stream_skip(k8s_kind kind);

/* k8s_stream_rv returns the last applied resourceVersion ("" if none). */
const char *k8s_stream_rv(const k8s_stream *s);

/* k8s_stream_events returns the number of events applied so far. */
uint64_t k8s_stream_events(const k8s_stream *s);

/*
 * k8s_stream_briefs returns how many of those were pod events applied from
 * the scanner's brief (podscan.h) instead of a full decode: every DELETED
 * event, and a MODIFIED event of a pod the cache holds bound or assumed on
 * the event's node from a text with the same digest (cache_pod_touch), so
 * nothing the cache or the pod hooks read has changed. Any other event,
 * or one whose fields the brief cannot carry (escapes, wrong types), is
 * decoded.
 */
uint64_t k8s_stream_briefs(const k8s_stream *s);

/*
 * k8s_stream_fields returns how many were ADDED or MODIFIED pod events
 * built without a DOM: the pod's spec text, or that text less what the
 * model never reads (json_project through k8s_stream_skip's rules), was
 * decoded before (specmemo.h: pods of one template), and the rest of the
 * pod is read off the line (model_pod_fields_read, model_pod_from_fields).
 * Any other pod event is decoded, its spec remembered.
 */
uint64_t k8s_stream_fields(const k8s_stream *s);

#endif

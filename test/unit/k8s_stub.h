/*
 * k8s_stub.h - an in-process fake API server for the k8s client tests.
 *
 * A tiny HTTP/1.1 server on 127.0.0.1 (port 0) with one thread per
 * connection. It holds Nodes, Pods and NodeShards as JSON, a global
 * resourceVersion and an event log, and serves them the way the API server
 * does: paginated lists with continue tokens (consistent snapshots),
 * chunked newline-delimited watch streams from a resourceVersion (ERROR 410
 * when it was compacted), pods/binding with the real 409 message, Leases
 * (coordination.k8s.io/v1, resourceVersion-checked), Events, and JSON
 * merge patches of a pod's annotations with the API server's preconditions
 * (metadata.resourceVersion: 409; metadata.uid: 422), of nodes/NAME/status
 * and of NodeShards (spec, or status through /status), and NodeShard
 * creation (409 AlreadyExists). Faults are queued per (path prefix, request
 * type) and consumed in order by the next matching request.
 *
 * Included as a .c by each test (the build makes one executable per test).
 */
#ifndef K8S_STUB_H
#define K8S_STUB_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct k8s_stub k8s_stub;

enum { STUB_NODE = 0, STUB_POD = 1, STUB_SHARD = 2, STUB__KINDS };

typedef enum stub_req {
    STUB_LIST = 0,
    STUB_WATCH = 1,
    STUB_POST = 2,
    STUB_ANY = 3,
    STUB_PATCH = 4,
} stub_req;

typedef enum stub_fault_kind {
    STUB_F_STATUS = 0,      /* arg = HTTP status, Status JSON body */
    STUB_F_DROP_MID,        /* watch: send half of the next event, then close */
    STUB_F_GARBAGE,         /* watch: a non-JSON line before the events */
    STUB_F_SLOW,            /* arg = ms delay before answering normally */
    STUB_F_HANG,            /* watch: headers, then silence until the client leaves */
    STUB_F_ERROR_410,       /* watch: 200 + ERROR event with code 410 */
    STUB_F_CLOSE,           /* close the connection without an answer */
    STUB_F_EXPIRE_CONTINUE, /* list page with a continue token: 410 */
    STUB_F_APPLY_CLOSE,     /* binding: apply it, then close without an answer */
    STUB_F_RETRY_AFTER,     /* arg = seconds: 429 with Retry-After, as API Priority and Fairness */
} stub_fault_kind;

k8s_stub *stub_new(void);
void stub_free(k8s_stub *s);
/* "http://127.0.0.1:PORT" (owned by the stub). */
const char *stub_url(k8s_stub *s);

/* State changes: each bumps the resourceVersion and logs a watch event.
 * stub_put stores a copy of obj (and sets obj's metadata.resourceVersion);
 * the caller keeps its reference. */
void stub_put(k8s_stub *s, int kind, json_t *obj);
bool stub_delete(k8s_stub *s, int kind, const char *key); /* name (nodes, shards) or uid (pods) */
void stub_bookmark(k8s_stub *s, int kind);
/* Forget the event log: watches from an older resourceVersion get 410. */
void stub_compact(k8s_stub *s);
/* Hold watch output (events queue up) / release it. */
void stub_pause_watches(k8s_stub *s, bool paused);
/* Abruptly close every open watch connection. */
void stub_drop_watches(k8s_stub *s);
void stub_set_shards_installed(k8s_stub *s, bool installed);

/* Queue a one-shot fault for the first request of type whose path starts
 * with path_prefix; a prefix ending in '$' takes only paths with no further
 * segment after it (no subresource such as /status). */
void stub_fault(k8s_stub *s, const char *path_prefix, stub_req type, stub_fault_kind f, int arg);
/* Faults still queued (not yet consumed). */
int stub_faults_pending(k8s_stub *s);

/* Counters. */
int stub_count(k8s_stub *s, const char *path_prefix, stub_req type);
int stub_events_posted(k8s_stub *s);
json_t *stub_last_event(k8s_stub *s); /* new reference or NULL */
int stub_connections(k8s_stub *s);
/* Open watch connections. */
int stub_watchers(k8s_stub *s);
/* Maximum concurrently open binding requests seen. */
int stub_max_inflight_binds(k8s_stub *s);
void stub_set_bind_delay(k8s_stub *s, int ms);

/* The Authorization header of the last request ("" when none). */
void stub_last_auth(k8s_stub *s, char *out, size_t len);

/* Deep copy of the Lease ns/name, NULL when absent (caller decrefs). The
 * stub serves Leases with the API server's optimistic concurrency: PUT
 * with a stale metadata.resourceVersion gets 409. */
json_t *stub_lease(k8s_stub *s, const char *ns, const char *name);
/* Stores a copy of obj as Lease ns/name (a new resourceVersion), as
 * another process holding it would have written it. */
void stub_put_lease(k8s_stub *s, const char *ns, const char *name, json_t *obj);
/* Stores a copy of obj as ConfigMap ns/name (a new resourceVersion);
 * served to GET only. */
void stub_put_configmap(k8s_stub *s, const char *ns, const char *name, json_t *obj);

/* Deep copy of the object of kind under key (name; uid for pods), NULL
 * when absent (caller decrefs). */
json_t *stub_object(k8s_stub *s, int kind, const char *key);

/* A malloc'ed string of n 'x's, for objects of a given size (caller
 * frees); NULL without memory. */
char *stub_filler(size_t n);

/* Writes a kubeconfig for the stub (bearer token "secret") to path;
 * false when it cannot. */
bool stub_write_kubeconfig(k8s_stub *s, const char *path);

/* Deep copy of the objects of kind (JSON array; caller decrefs). */
json_t *stub_objects(k8s_stub *s, int kind);

/* Builders. */
json_t *stub_make_node(const char *name, const char *cpu, const char *mem, int pods);
json_t *stub_make_pod(const char *ns, const char *name, const char *uid, const char *node,
                      const char *cpu, const char *mem);

#endif

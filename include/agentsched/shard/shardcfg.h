/*
 * shardcfg.h - the sharding config in Volcano's format, as
 * `agentsched shard-controller` and Volcano's sharding controller read it:
 * parsed, validated, reloaded when its file or ConfigMap changes. The
 * assignment it drives is shardctl.h's engine.
 */
#ifndef AGENTSCHED_SHARDCFG_H
#define AGENTSCHED_SHARDCFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"

struct json_t;

#define SHARDCFG_MAX_SCHEDULERS       32
#define SHARDCFG_DEFAULT_WARMUP_LABEL "node.volcano.sh/warmup"
#define SHARDCFG_CONFIG_MAX           (1 << 20) /* config file cap */

typedef enum shardcfg_policy_kind {
    SHARDCFG_POL_ALLOCATION_RATE = 0, /* filter + score on CPU request ratio */
    SHARDCFG_POL_WARMUP,              /* score: 1 with the label, else 0 */
    SHARDCFG_POL_NODE_LIMIT,          /* select: minNodes / maxNodes */
} shardcfg_policy_kind;

typedef struct shardcfg_policy {
    shardcfg_policy_kind kind;
    double weight;   /* >= 0, default 1 */
    double min_util; /* allocation-rate: [0,1] */
    double max_util;
    char *label;       /* warmup: key (owned) */
    char *label_value; /* warmup: value (owned) */
    long min_nodes;    /* node-limit: informational floor (reported) */
    long max_nodes;    /* node-limit: <= 0 = no cap */
} shardcfg_policy;

typedef struct shardcfg_sched {
    char *name; /* the NodeShard's name */
    char *type; /* "agent", "volcano", ... (informational) */
    shardcfg_policy *pol;
    size_t npol;
    long min_nodes, max_nodes; /* from node-limit (0 / 0 without it) */
} shardcfg_sched;

typedef struct shardcfg_config {
    shardcfg_sched *sched;
    size_t n;
    int64_t sync_period_ms;  /* shardSyncPeriod; default 60 s */
    bool node_event_trigger; /* enableNodeEventTrigger; default true */
    /* Fields Volcano's format does not have, ignored as Volcano ignores
     * them, by path ("schedulerConfigs[0].foo, ..."; "" when none, cut at
     * the buffer's end): the caller warns naming them. */
    char unknown[512];
} shardcfg_config;

/*
 * shardcfg_parse parses and validates a config document (YAML or
 * JSON). origin names it in messages. Accepts Volcano's format
 * (schedulerConfigs[] {name, type, policies[] {name, weight, arguments}},
 * shardSyncPeriod, enableNodeEventTrigger) and its deprecated flat fields
 * (cpuUtilizationMin/Max, preferWarmupNodes, minNodes, maxNodes), which
 * become policies. Omitted limits are 0 as in Volcano (maxCPUUtil too, so
 * a scheduler with neither policies nor limits takes idle nodes only), and
 * what Volcano's parsing or its policies reject is rejected (a minimum
 * above its maximum, minNodes/maxNodes outside node-limit). The document
 * may also be the whole ConfigMap Volcano reads (apiVersion v1, kind
 * ConfigMap: its data's sharding.yaml), or a mapping with only the key
 * sharding.yaml (a data excerpt). Unknown fields are ignored as Volcano
 * ignores them and listed in (*out)->unknown for the caller to warn;
 * unknown policies are errors (Volcano rejects them too). AS_EPARSE /
 * AS_EINVAL / AS_ERANGE with diag naming the field. Caller owns *out
 * (shardcfg_free).
 */
as_err shardcfg_parse(const char *data, size_t len, const char *origin, shardcfg_config **out,
                      as_diag *diag);

/* shardcfg_load reads path (capped at SHARDCFG_CONFIG_MAX) and
 * parses it. AS_EIO when unreadable. */
as_err shardcfg_load(const char *path, shardcfg_config **out, as_diag *diag);

/* shardcfg_free frees the config and every scheduler, policy and
 * string in it. NULL ok. Free the engines that borrow it first. */
void shardcfg_free(shardcfg_config *cfg);

/* Identity of a config file's current content (stat fields). */
typedef struct shardcfg_file_stamp {
    int64_t mtime_ns;
    int64_t size;
    uint64_t ino;
    bool valid;
} shardcfg_file_stamp;

/*
 * shardcfg_reload checks path against *stamp; when the file changed
 * it updates *stamp and re-reads it. Valid: *next gets the new config
 * (caller swaps it in and frees the old one). Invalid: *next stays NULL and
 * the error is returned with diag (the caller keeps its current config;
 * the same bad content is not reported again). Unchanged: AS_OK, *next
 * NULL. A file that vanished is AS_EIO (the current config is kept).
 */
as_err shardcfg_reload(const char *path, shardcfg_file_stamp *stamp, shardcfg_config **next,
                       as_diag *diag);

/*
 * shardcfg_from_configmap parses the config held in a v1 ConfigMap
 * object (borrowed JSON) under data[key] (NULL key = "sharding.yaml", as
 * Volcano's controller uses). origin names it in messages. AS_ENOTFOUND
 * when the key is absent; otherwise as shardcfg_parse.
 */
struct json_t;
as_err shardcfg_from_configmap(const struct json_t *cm, const char *key, const char *origin,
                               shardcfg_config **out, as_diag *diag);

/* shardcfg_duration_parse parses a Go duration ("60s", "1m30s", "500ms",
 * "2h") or a plain number of seconds into ms. AS_EINVAL on bad input. */
as_err shardcfg_duration_parse(const char *s, int64_t *ms);

#endif

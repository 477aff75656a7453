/*
 * gpushare.h - the GPU share advertiser's decision as data: from a v1 Node
 * (JSON) and what this process last wrote to it, whether the node's
 * status.capacity and status.allocatable should carry the share resource
 * (agentsched.io/gpu-milli) at devices x 1000, lose it, or be left alone;
 * and the merge patch of nodes/status that does it.
 *
 * RULES (gpushare_decide)
 *   devices   status.allocatable[gpu_name] (the kubelet's healthy devices;
 *             status.capacity[gpu_name] when allocatable lacks it). The
 *             kubelet copies every capacity entry into allocatable on each
 *             status sync, so the same value goes into both.
 *   opt out   annotation agentsched.io/gpu-share-advertiser: "off" on the
 *             node: never written (GPUSHARE_OPTED_OUT).
 *   stand down when a value this process wrote was replaced by another
 *             one GPUSHARE_FIGHT_LIMIT times within GPUSHARE_FIGHT_WINDOW_MS
 *             while the device count stayed the same, someone else (a
 *             device plugin registering the same name, whose values the
 *             kubelet writes on every sync) owns the resource: no more
 *             writes to that node until its device count changes
 *             (GPUSHARE_STOOD_DOWN).
 *   set       devices > 0 and capacity or allocatable differs from
 *             devices x 1000.
 *   remove    devices == 0 and the resource is present (with any value).
 */
#ifndef AGENTSCHED_MODEL_GPUSHARE_H
#define AGENTSCHED_MODEL_GPUSHARE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define GPUSHARE_OPT_OUT_ANNOTATION "agentsched.io/gpu-share-advertiser"
#define GPUSHARE_FIGHT_LIMIT        3
#define GPUSHARE_FIGHT_WINDOW_MS    (10 * 60 * 1000)

/* What this process remembers of one node (zero-initialised = nothing). */
typedef struct gpushare_state {
    bool wrote;      /* a write of `written` succeeded */
    int64_t written; /* the milli value last written (0 = removed) */
    int64_t devices; /* the device count it was written for */
    int overwrites;  /* times it was found replaced, in the window */
    int64_t first_overwrite_ms;
    bool stood_down; /* for `devices`; cleared when the count moves */
} gpushare_state;

typedef enum gpushare_action {
    GPUSHARE_NOOP = 0,   /* already right */
    GPUSHARE_SET,        /* write want into capacity and allocatable */
    GPUSHARE_REMOVE,     /* delete the resource from both */
    GPUSHARE_OPTED_OUT,  /* the node's annotation says off */
    GPUSHARE_STOOD_DOWN, /* someone else owns the resource on this node */
} gpushare_action;

typedef struct gpushare_decision {
    gpushare_action action;
    int64_t devices; /* device count read from the node */
    int64_t want;    /* devices x 1000 */
    bool has_cap;    /* the resource is in status.capacity */
    int64_t cap;     /* its value there (0 when absent) */
    bool has_alloc;  /* the resource is in status.allocatable */
    int64_t alloc;
    bool newly_stood_down; /* this call decided to stand down */
} gpushare_decision;

/*
 * gpushare_decide applies the rules above to node (a v1 Node object) at
 * now_ms, updating *st (overwrite counting, standing down; the caller
 * records a successful write with gpushare_wrote). Unparseable quantities
 * count as absent. Never fails.
 */
void gpushare_decide(const json_t *node, const char *gpu_name, const char *share_name,
                     gpushare_state *st, int64_t now_ms, gpushare_decision *out);

/* gpushare_wrote records that the write for d succeeded. */
void gpushare_wrote(gpushare_state *st, const gpushare_decision *d);

/*
 * gpushare_patch_body returns the merge patch (application/merge-patch+json)
 * of nodes/NAME/status for a SET or REMOVE decision as a malloc'ed string,
 * e.g. {"status":{"capacity":{"agentsched.io/gpu-milli":"4000"},
 * "allocatable":{"agentsched.io/gpu-milli":"4000"}}}, with null values for
 * REMOVE. NULL for any other action or out of memory.
 */
char *gpushare_patch_body(const char *share_name, const gpushare_decision *d);

#endif

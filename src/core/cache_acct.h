/*
 * cache_acct.h - how the cache charges pods to nodes: pod entries, the
 * per-name records that hold them while their node is away, the assumed
 * list, and the usage and GPU devices an entry puts on its node. Works on
 * the accounting state (cache_int.h) alone, below the cache's public API.
 * Every function runs with the cache's writer mutex held; those that change
 * a node's usage also bump its versions and log it (cache.h). Private to
 * src/core (cache.c is the only caller).
 */
#ifndef AGENTSCHED_CACHE_ACCT_H
#define AGENTSCHED_CACHE_ACCT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"
#include "agentsched/model/pod.h"
#include "cache_int.h"

/* cache_acct_free frees every entry and record of a (not a itself). */
void cache_acct_free(cache_acct *a);

/* cache_acct_pick_devices chooses GPU devices for e on n: best fit first; a
 * pod the API server says is bound there must be counted even when no
 * device set fits (someone else overcommitted), so it falls back to the
 * least used. 0 when e needs no GPU or n has none. */
uint32_t cache_acct_pick_devices(const cache_acct_node *n, const pentry *e);

/* cache_acct_devices_valid: can e keep the devices it held (on this node's
 * previous spec or incarnation) given n's current usage? Keeping them
 * preserves a packing that a fresh best-fit pass might not reproduce. */
bool cache_acct_devices_valid(const cache_acct_node *n, const pentry *e);

/* cache_acct_assumed_unlink takes e (state ASSUMED) off the assumed list;
 * the caller adjusts the counters. */
void cache_acct_assumed_unlink(cache_acct *a, pentry *e);

/* cache_acct_confirm makes e BOUND (from ASSUMED or BOUND) and marks it
 * seen in the current epoch. */
void cache_acct_confirm(cache_acct *a, pentry *e);

/* cache_acct_rec_get returns the record of node name[0..len), creating an
 * empty one when create is set; NULL when absent (or out of memory). */
prec *cache_acct_rec_get(cache_acct *a, const char *name, size_t len, bool create);

/* cache_acct_rec_maybe_free drops r when it no longer has a node or pods. */
void cache_acct_rec_maybe_free(cache_acct *a, prec *r);

/* cache_acct_entry_new allocates an unindexed entry for pod under uid (its
 * request stored compactly, its strings in the same block); NULL when out
 * of memory. Index it with cache_acct_insert or free() it. */
pentry *cache_acct_entry_new(const char *uid, size_t uid_len, const model_pod *pod);

/* cache_acct_same_request: does the entry already hold exactly the pod's
 * demand (request, GPUs and the containers' CPU it counts)? */
bool cache_acct_same_request(const pentry *e, const model_pod *pod);

/* cache_acct_attach places e's usage on its record's node (if any; else it
 * counts as detached), choosing devices first when choose_devices is set
 * and the ones e holds no longer fit. */
void cache_acct_attach(cache_acct *a, pentry *e, bool choose_devices);

/* cache_acct_drop releases e's usage, unindexes and frees it (and its
 * record when that is left empty). */
void cache_acct_drop(cache_acct *a, pentry *e);

/* cache_acct_insert indexes the new entry e on the named node in state and
 * charges it (cache_acct_attach). AS_ENOMEM leaves e unindexed for the
 * caller to free. */
as_err cache_acct_insert(cache_acct *a, pentry *e, const char *node, size_t node_len,
                         cache_acct_state state, bool choose_devices);

/* cache_acct_node_attach makes n the node of record r (n was not
 * published before) and charges the pods recorded against r's name on it:
 * a node that came back, or pods that arrived before their node. */
void cache_acct_node_attach(cache_acct *a, prec *r, cache_acct_node *n);

/* cache_acct_node_detach leaves r's pods detached: its node is going. */
void cache_acct_node_detach(cache_acct *a, prec *r);

/* cache_acct_replace_devices re-places the GPU shares of r's pods after its node's
 * device count changed (indexes may no longer exist), and counts the
 * node's devices again. Leaves the version bumps to the caller, which
 * changes the spec alongside. */
void cache_acct_replace_devices(cache_acct *a, prec *r);

/* cache_acct_expire drops the entries ASSUMED before now_ms - ttl_ms and
 * returns how many. */
size_t cache_acct_expire(cache_acct *a, int64_t now_ms, int64_t ttl_ms);

/* cache_acct_drop_stale drops the BOUND entries not seen since epoch; the
 * count in *n. AS_ENOMEM drops none. */
as_err cache_acct_drop_stale(cache_acct *a, uint64_t epoch, size_t *n);

#endif

/*
 * cache_acct.h - how the cache charges pods to nodes: pod entries, the
 * per-name records that hold them while their node is away, the assumed
 * list, and the usage and GPU devices an entry puts on its node. Every
 * function runs with the cache's writer mutex held; those that change a
 * node's usage also bump its versions and log it (cache.h). Private to
 * src/core (cache.c is the only caller).
 */
#ifndef AGENTSCHED_CACHE_ACCT_H
#define AGENTSCHED_CACHE_ACCT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"
#include "agentsched/core/cache.h"
#include "agentsched/model/pod.h"
#include "cache_int.h"

/* cache_acct_pick_devices chooses GPU devices for e on n: best fit first; a
 * pod the API server says is bound there must be counted even when no
 * device set fits (someone else overcommitted), so it falls back to the
 * least used. 0 when e needs no GPU or n has none. */
uint32_t cache_acct_pick_devices(const cnode *n, const pentry *e);

/* cache_acct_devices_valid: can e keep the devices it held (on this node's
 * previous spec or incarnation) given n's current usage? Keeping them
 * preserves a packing that a fresh best-fit pass might not reproduce. */
bool cache_acct_devices_valid(const cnode *n, const pentry *e);

/* cache_acct_assumed_unlink takes e (state ASSUMED) off the assumed list;
 * the caller adjusts the counters. */
void cache_acct_assumed_unlink(cache *c, pentry *e);

/* cache_acct_rec_get returns the record of node name[0..len), creating an
 * empty one when create is set; NULL when absent (or out of memory). */
prec *cache_acct_rec_get(cache *c, const char *name, size_t len, bool create);

/* cache_acct_rec_maybe_free drops r when it no longer has a node or pods. */
void cache_acct_rec_maybe_free(cache *c, prec *r);

/* cache_acct_entry_new allocates an unindexed entry for pod under uid (its
 * request stored compactly, its strings in the same block); NULL when out
 * of memory. Index it with cache_acct_insert or free() it. */
pentry *cache_acct_entry_new(const char *uid, size_t uid_len, const model_pod *pod);

/* cache_acct_same_request: does the entry already hold exactly the pod's
 * demand? */
bool cache_acct_same_request(const pentry *e, const model_pod *pod);

/* cache_acct_attach places e's usage on its record's node (if any; else it
 * counts as detached), choosing devices first when choose_devices is set
 * and the ones e holds no longer fit. */
void cache_acct_attach(cache *c, pentry *e, bool choose_devices);

/* cache_acct_drop releases e's usage, unindexes and frees it (and its
 * record when that is left empty). */
void cache_acct_drop(cache *c, pentry *e);

/* cache_acct_insert indexes the new entry e on the named node in state and
 * charges it (cache_acct_attach). AS_ENOMEM leaves e unindexed for the
 * caller to free. */
as_err cache_acct_insert(cache *c, pentry *e, const char *node, size_t node_len,
                         cache_pod_state state, bool choose_devices);

#endif

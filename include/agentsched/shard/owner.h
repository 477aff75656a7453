/*
 * owner.h - one writer of NodeShard.spec.nodesDesired: whether another
 * sharding controller (Volcano's, in vc-controller-manager) manages the
 * NodeShards, so that `agentsched shard-controller` stands down while it
 * does and takes over once it stopped.
 *
 * The signal is two-fold, both read from the apiserver: the other
 * controller's leader-election Lease is held and renewed (judged on our own
 * clock, as client-go judges expiry), AND its field manager owns
 * spec.nodesDesired of some NodeShard (metadata.managedFields) in an entry
 * wrote since the Lease's holder acquired it (less SHARD_OWNER_SKEW_S for
 * clocks) and since we last took over. The Lease alone does not say the
 * sharding controller is among the controllers running; managedFields alone
 * do not say the writer is alive, nor that it is the current holder.
 */
#ifndef AGENTSCHED_SHARD_OWNER_H
#define AGENTSCHED_SHARD_OWNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"
#include "agentsched/k8s/lease.h"
#include "agentsched/k8s/watch.h"

/* Volcano's defaults: vc-controller-manager's Lease and the field manager
 * its clients get (no fieldManager is set; the apiserver takes the
 * User-Agent up to '/', which client-go makes the binary's name). */
#define SHARD_OWNER_VOLCANO_LEASE_NS   "volcano-system"
#define SHARD_OWNER_VOLCANO_LEASE_NAME "vc-controller-manager"
#define SHARD_OWNER_VOLCANO_MANAGER    "vc-controller-manager"

/* Tolerated skew between the holder's clock (acquireTime) and the
 * apiserver's (managedFields times), in seconds. A new holder acquires a
 * Lease at least its duration (15 s by default) after the old one last
 * renewed it, so entries of an earlier process stay older than this. */
#define SHARD_OWNER_SKEW_S 5

typedef struct shard_owner_entry {
    char shard[254];
    char time[40];
} shard_owner_entry;

typedef struct shard_owner {
    char manager[64];        /* the other controller's field manager */
    shard_owner_entry *base; /* its nodesDesired entries when we last wrote */
    size_t nbase;
    bool foreign;  /* the last decision */
    char why[300]; /* what the last decision rests on */
} shard_owner;

/* shard_owner_init: manager is the other controller's field manager
 * (copied, at most 63 characters). Nothing to free but shard_owner_free. */
void shard_owner_init(shard_owner *o, const char *manager);

/* shard_owner_free frees the baseline. */
void shard_owner_free(shard_owner *o);

/*
 * shard_owner_lease_live: the Lease last observed (k8s_lease_observe) is
 * held and its record changed less than its duration ago on our clock.
 * An absent Lease or an empty holder is not live.
 */
bool shard_owner_lease_live(const k8s_lease_obs *obs, int64_t now_ms);

/*
 * shard_owner_step decides from the other controller's Lease liveness and
 * acquireTime (RFC 3339; "" or unparsable: not used) and the NodeShards
 * (borrowed) whether it owns them: lease_live and some NodeShard's
 * nodesDesired is owned by o->manager in an entry written no earlier than
 * acquire_time - SHARD_OWNER_SKEW_S and not in the baseline (a shard or
 * time not seen when we last owned them). Whenever the answer is no, the
 * baseline becomes the current entries of o->manager, so entries left
 * behind by a controller that stopped never count again, and its first
 * write after it returned does. At the very first step the baseline is
 * empty: any entry since the holder acquired counts. Returns the decision
 * (also in o->foreign, with o->why for the log); AS_ENOMEM keeps the
 * previous one.
 */
as_err shard_owner_step(shard_owner *o, bool lease_live, const char *acquire_time,
                        const k8s_shard *shards, size_t n, bool *foreign);

/* shard_owner_parse_time: RFC 3339 UTC ("2026-12-03T10:00:00Z", fraction
 * allowed) to Unix seconds; -1 when unparsable. */
int64_t shard_owner_parse_time(const char *s);

#endif

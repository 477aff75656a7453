/*
 * lease.h - leader election on a coordination.k8s.io/v1 Lease: the
 * candidate's rounds (the client's elector thread drives one; the shard
 * controller drives its own) and the client-go expiry rule they follow.
 */
#ifndef AGENTSCHED_K8S_LEASE_H
#define AGENTSCHED_K8S_LEASE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"
#include "agentsched/k8s/transport.h"

/* What a candidate last observed of the Lease. */
typedef struct k8s_lease_obs {
    bool exists;
    char holder[256];      /* spec.holderIdentity ("" = free) */
    char renew_time[64];   /* spec.renewTime as written */
    char acquire_time[64]; /* spec.acquireTime as written (the holder's clock) */
    char resource_version[64];
    int64_t duration_ms; /* spec.leaseDurationSeconds */
    int64_t transitions; /* spec.leaseTransitions */
    int64_t observed_ms; /* local monotonic time the record last changed */
} k8s_lease_obs;

typedef enum k8s_lease_action {
    K8S_LEASE_CREATE = 0, /* no Lease: create it holding it */
    K8S_LEASE_RENEW,      /* we hold it: renew */
    K8S_LEASE_ACQUIRE,    /* free or expired: take it over */
    K8S_LEASE_FOLLOW,     /* someone else holds a live lease */
} k8s_lease_action;

/*
 * k8s_lease_decide: expiry is judged as client-go does, on the local
 * clock: a lease whose record has not changed for its duration since we
 * first saw that record is expired (no trust in the holder's clock).
 */
k8s_lease_action k8s_lease_decide(const k8s_lease_obs *obs, const char *me, int64_t now_ms);

/* k8s_lease_observe folds a freshly read Lease object (borrowed JSON, NULL
 * when 404) into obs, resetting observed_ms to now_ms when the record
 * changed. */
void k8s_lease_observe(k8s_lease_obs *obs, const json_t *lease, int64_t now_ms);

/* k8s_lease_default_identity: $POD_NAME, else "HOSTNAME-PID". */
void k8s_lease_default_identity(char *out, size_t len);

typedef struct k8s_lease_config {
    const char *ns;            /* default kube-system */
    const char *name;          /* required */
    const char *identity;      /* required; 1..255 characters */
    int64_t duration_ms;       /* default 15000, at least 1000 */
    int64_t renew_deadline_ms; /* default 2/3 of the duration */
} k8s_lease_config;

typedef struct k8s_lease k8s_lease;

/* k8s_lease_new prepares a candidate (strings copied; k borrowed, must
 * outlive it). AS_EINVAL naming the flag for a bad config. Caller owns
 * *out (k8s_lease_free). Not thread-safe: one thread drives it. */
as_err k8s_lease_new(k8s_client *k, const k8s_lease_config *cfg, k8s_lease **out, as_diag *diag);

/* k8s_lease_free frees l without releasing the lease. NULL ok. */
void k8s_lease_free(k8s_lease *l);

/*
 * k8s_lease_step runs one round on the calling thread (now_ms: monotonic
 * ms): reads the Lease, then creates, renews or takes it over as
 * k8s_lease_decide says, with the read resourceVersion as the lock (a 409
 * means another candidate won). Requests bypass the client's rate limiter
 * and time out after a quarter of (duration - renew deadline) each. A
 * holder that cannot renew keeps the lease until the renew deadline after
 * its last successful round, then steps down (a round begun before the
 * deadline ends by half the gap after it): before any other candidate can
 * see the lease expire. Returns true while held.
 */
bool k8s_lease_step(k8s_lease *l, int64_t now_ms);

/* k8s_lease_held: the result of the last round. */
bool k8s_lease_held(const k8s_lease *l);

/* k8s_lease_deadline: while held, the monotonic ms at which the holder
 * steps down unless a round renews first (INT64_MAX when not held); the
 * elector wakes for it. */
int64_t k8s_lease_deadline(const k8s_lease *l);

/* k8s_lease_identity: our holder identity (borrowed). */
const char *k8s_lease_identity(const k8s_lease *l);

/* k8s_lease_observed: the Lease as last read or written (borrowed). */
const k8s_lease_obs *k8s_lease_observed(const k8s_lease *l);

/* k8s_lease_release gives a held lease up (empty holder, 1 s duration, as
 * client-go's ReleaseOnCancel), so a standby takes over at its next round
 * instead of after the whole duration. No-op when not held. */
void k8s_lease_release(k8s_lease *l, int64_t now_ms);

#endif

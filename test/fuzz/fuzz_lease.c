/* fuzz_lease.c - libFuzzer target for the Lease decoder (k8s_lease_observe)
 * and the election decision on what it decoded.
 *
 * Besides "no crash", checks the invariants the election relies on: a
 * decoded duration is within 1 ms..1 h (a hostile leaseDurationSeconds
 * must not make a lease never, or instantly, expire); the same record
 * observed again keeps its observation time; a holder named like us is
 * always renewed; a live record held by someone else is followed until its
 * duration has passed on our clock, then taken over. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/k8s/lease.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *doc = json_loadb((const char *)data, size, 0, NULL);
    if (!doc)
        return 0;
    k8s_lease_obs obs = {0};
    k8s_lease_observe(&obs, doc, 1000);
    if (!obs.exists || obs.duration_ms <= 0 || obs.duration_ms > 3600000)
        abort();
    if (obs.observed_ms != 1000)
        abort(); /* a first sighting is a change */
    k8s_lease_observe(&obs, doc, 5000);
    if (obs.observed_ms != 1000)
        abort(); /* the same record restarts no clock */
    const char *me = obs.holder[0] ? obs.holder : "me";
    k8s_lease_action a = k8s_lease_decide(&obs, me, 5000);
    if (obs.holder[0] && a != K8S_LEASE_RENEW)
        abort();
    if (!obs.holder[0] && a != K8S_LEASE_ACQUIRE)
        abort();
    if (obs.holder[0] && strcmp(obs.holder, "someone-else") != 0) {
        if (k8s_lease_decide(&obs, "someone-else", 1000 + obs.duration_ms) != K8S_LEASE_FOLLOW)
            abort();
        if (k8s_lease_decide(&obs, "someone-else", 1001 + obs.duration_ms) != K8S_LEASE_ACQUIRE)
            abort();
    }
    json_decref(doc);
    return 0;
}

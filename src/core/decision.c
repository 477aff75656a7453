/*
 * decision.c - see decision.h.
 */
#include "agentsched/core/decision.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

/* See decision.h. */
void decision_begin(decision *d, binder *b, const decision_ports *ports)
{
    memset(d, 0, sizeof *d);
    d->binder = b;
    d->ports = ports;
    d->out.chosen = -1;
    if (ports && ports->gate_begin)
        d->ticket = ports->gate_begin(ports->gate_arg);
}

/* See decision.h. */
as_err decision_reserve(decision *d, const model_pod *pod, const sched_candidate *cands, size_t n)
{
    assert(d->state == DECISION_OPEN || d->state == DECISION_REFUSED);
    d->pod = pod;
    /* the key straight into d->uid: model_pod_key returns either the
     * pod's uid or the buffer it was given */
    size_t n_key = 0;
    const char *key = model_pod_key(pod, d->uid, sizeof d->uid, &n_key);
    if (key != d->uid) {
        if (n_key >= sizeof d->uid)
            n_key = sizeof d->uid - 1;
        memcpy(d->uid, key, n_key);
        d->uid[n_key] = 0;
    }
    d->err = binder_commit(d->binder, pod, cands, n, &d->out);
    d->state = d->err == AS_OK ? DECISION_RESERVED : DECISION_REFUSED;
    return d->err;
}

/* See decision.h. */
as_err decision_reserve_noted(decision *d, const char *uid, const char *node_name)
{
    assert(d->state == DECISION_OPEN || d->state == DECISION_REFUSED);
    snprintf(d->uid, sizeof d->uid, "%s", uid);
    d->err = binder_bind_noted(d->binder, uid, node_name, &d->out);
    d->state = d->err == AS_OK ? DECISION_RESERVED : DECISION_REFUSED;
    return d->err;
}

/* bound_or_released ends a reserved decision's bind with its result
 * err: bound, or the reservation released. */
static as_err bound_or_released(decision *d, as_err err)
{
    d->err = err;
    if (err == AS_OK) {
        d->state = DECISION_BOUND;
        return AS_OK;
    }
    binder_release(d->binder, d->uid);
    d->state = DECISION_RELEASED;
    return err;
}

/* See decision.h. */
as_err decision_bind(decision *d, as_diag *diag)
{
    assert(d->state == DECISION_RESERVED);
    if (!d->ports || !d->ports->bind)
        return bound_or_released(d, AS_OK);
    return bound_or_released(d, d->ports->bind(d->ports->arg, d, diag));
}

/* See decision.h. */
as_err decision_try_bind(decision *d, as_diag *diag)
{
    assert(d->state == DECISION_RESERVED);
    if (!d->ports || !d->ports->try_bind)
        return AS_EAGAIN;
    as_err err = d->ports->try_bind(d->ports->arg, d, diag);
    if (err == AS_EAGAIN)
        return AS_EAGAIN; /* still reserved */
    return bound_or_released(d, err);
}

/* See decision.h. */
as_err decision_bind_settled(decision *d, as_err err)
{
    assert(d->state == DECISION_RESERVED);
    return bound_or_released(d, err);
}

/* See decision.h. */
void decision_unreserve(decision *d)
{
    assert(d->state != DECISION_ENDED);
    if (d->state != DECISION_RESERVED)
        return;
    binder_release(d->binder, d->uid);
    d->state = DECISION_RELEASED;
}

/* See decision.h. */
void decision_end(decision *d)
{
    assert(d->state != DECISION_ENDED);
    d->final = d->state;
    if (d->ports && d->ports->report)
        d->ports->report(d->ports->arg, d);
    if (d->ports && d->ports->gate_end)
        d->ports->gate_end(d->ports->gate_arg, d->ticket);
    d->state = DECISION_ENDED;
}

/* See decision.h. */
const char *decision_state_name(decision_state s)
{
    switch (s) {
    case DECISION_OPEN:
        return "open";
    case DECISION_REFUSED:
        return "refused";
    case DECISION_RESERVED:
        return "reserved";
    case DECISION_BOUND:
        return "bound";
    case DECISION_RELEASED:
        return "released";
    case DECISION_ENDED:
        return "ended";
    }
    return "unknown";
}

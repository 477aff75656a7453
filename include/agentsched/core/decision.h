/*
 * decision.h - the one protocol every entry point reserves and binds
 * through.
 *
 * agentsched makes one kind of decision: this pod on this node, these
 * devices. Every entry point that takes capacity (the extender's bind verb,
 * Volcano's allocateFunc, the fast path) runs the same cycle, its steps
 * named after kube-scheduler's scheduling framework:
 *
 *   gate      PreFilter    decision_begin enters the ports' gate (the
 *                          NodeShard decision window: no status releasing a
 *                          node goes out while a decision may still land on
 *                          it)
 *   evaluate  Filter+Score the caller's (sched_evaluate, eqcache, or the
 *                          evaluation the extender noted at filter time)
 *   reserve   Reserve      decision_reserve / decision_reserve_noted: the
 *                          versioned binder assumes the pod in the cache
 *   bind      Bind         decision_bind: the ports' bind (the Binding
 *                          subresource); a failure unreserves. Entry points
 *                          whose caller binds by itself (Volcano, the
 *                          embedded extender) never call it: the
 *                          reservation stays assumed until the watch or the
 *                          caller says otherwise
 *   report    PostBind /   decision_end: the ports' report with the
 *             Unreserve    outcome, then the gate is left
 *
 * Where agentsched's cycle differs from the framework: there is no Permit
 * step, and PreBind (writing devices on the pod) is part of the ports'
 * bind.
 *
 * A decision is a value: it lives on the caller's stack, or is copied into
 * a job for another thread (the fast path's bind stage). For each
 * decision_begin exactly one decision_end; reserve until one succeeds (a
 * refused reserve may be tried again, e.g. once the pod is noted); bind
 * only after a successful reserve, at most once. Breaking these is a bug in the
 * entry point and asserts. Thread-safe as the binder is: one decision is
 * used by one thread at a time.
 */
#ifndef AGENTSCHED_DECISION_H
#define AGENTSCHED_DECISION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"
#include "agentsched/core/binder.h"
#include "agentsched/core/sched.h"
#include "agentsched/model/pod.h"

typedef struct decision decision;

/* What plugs into the cycle; every function may be NULL (no gate, nothing
 * to bind, nothing to report). The gate is the server's (gate_arg handed
 * back to it: core_decision_ports fills it from the core), bind and report
 * the entry point's (arg handed back to them). */
typedef struct decision_ports {
    /* gate_begin enters the gate and returns a ticket for gate_end. */
    uint64_t (*gate_begin)(void *gate_arg);
    void (*gate_end)(void *gate_arg, uint64_t ticket);
    void *gate_arg;
    /* bind makes the reservation real (pods/binding, UID precondition):
     * AS_OK, or an error with diag filled; the cycle then unreserves. */
    as_err (*bind)(void *arg, const decision *d, as_diag *diag);
    /* report sees the decision as it ends (reserved, bound or not). */
    void (*report)(void *arg, const decision *d);
    void *arg;
    /* try_bind is one attempt of bind that never waits: AS_EAGAIN when it
     * is not settled, and the decision stays reserved. May be NULL. */
    as_err (*try_bind)(void *arg, const decision *d, as_diag *diag);
} decision_ports;

typedef enum decision_state {
    DECISION_OPEN = 0, /* gate entered, nothing reserved */
    DECISION_REFUSED,  /* reserve found no candidate (or failed) */
    DECISION_RESERVED, /* assumed in the cache */
    DECISION_BOUND,    /* reserved and the ports' bind succeeded */
    DECISION_RELEASED, /* reserved, then unreserved (bind failed, or abandoned) */
    DECISION_ENDED,
} decision_state;

struct decision {
    binder *binder;              /* borrowed */
    const decision_ports *ports; /* borrowed; outlives the decision */
    uint64_t ticket;             /* from gate_begin */
    decision_state state;
    decision_state final; /* the state decision_end found */
    as_err err;           /* reserve's, then bind's result */
    const model_pod *pod; /* borrowed; NULL for a noted reserve */
    char uid[600];        /* the binder's key: UID, else namespace/name */
    binder_outcome out;   /* reserve's outcome (node, devices, how) */
};

/* decision_begin starts a decision on b (borrowed) with ports (borrowed,
 * may be NULL): enters the gate. */
void decision_begin(decision *d, binder *b, const decision_ports *ports);

/* decision_reserve assumes pod (borrowed; must outlive the decision) on
 * the first of cands[0..n) the binder accepts (binder_commit). AS_OK with
 * d->out filled; AS_ECONFLICT when every candidate was refused or the pod
 * is bound elsewhere (d->out.reason says why); other errors as
 * binder_commit. */
as_err decision_reserve(decision *d, const model_pod *pod, const sched_candidate *cands, size_t n);

/* decision_reserve_noted is the reserve of the extender's bind verb: the
 * pod was noted at filter time under uid (binder_note), and is reserved on
 * node_name (binder_bind_noted). AS_ENOTFOUND when there is no note. */
as_err decision_reserve_noted(decision *d, const char *uid, const char *node_name);

/* decision_bind calls the ports' bind for a reserved decision; on its
 * failure unreserves (binder_release) and returns its error. AS_OK without
 * a call when the ports have no bind. (A reservation the binder found
 * already in place, d->out.how == BINDER_IDEMPOTENT, is the port's to
 * judge: the extender's bind verb posts nothing for it, the fast path
 * binds it.) */
as_err decision_bind(decision *d, as_diag *diag);

/* decision_try_bind is decision_bind with the ports' try_bind, except
 * that its AS_EAGAIN (and no try_bind: AS_EAGAIN without a call) leaves
 * the decision reserved, for a decision_bind later, on any thread. */
as_err decision_try_bind(decision *d, as_diag *diag);

/* decision_bind_settled ends a reserved decision's bind with err, the
 * result of a bind the entry point made by its own means (the fast path's
 * pod watch sends a Binding and reads its answer later): AS_OK bound,
 * else unreserved, as decision_bind would; returns err. */
as_err decision_bind_settled(decision *d, as_err err);

/* decision_unreserve gives up a reservation that will not be bound (the
 * entry point abandons it). No-op unless reserved. */
void decision_unreserve(decision *d);

/* decision_end reports the decision to the ports and leaves the gate.
 * Exactly once per decision_begin. */
void decision_end(decision *d);

/* decision_state_name: "open", "refused", "reserved", "bound",
 * "released", "ended". */
const char *decision_state_name(decision_state s);

#endif

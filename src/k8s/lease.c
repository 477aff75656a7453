/*
 * lease.c - leader election on a coordination.k8s.io/v1 Lease, as
 * client-go's leaderelection does it: read the Lease, create it, renew it
 * or take it over once it expired, with the resourceVersion as the
 * optimistic lock. Expiry is judged on our own monotonic clock (how long
 * the record has not changed since we first saw it), never on the holder's
 * wall clock.
 *
 * Used by `agentsched serve --leader-elect` (the elector thread in
 * k8s.c gates the fast path) and by the shard controller.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentsched/base/clock.h"
#include "agentsched/base/log.h"
#include "agentsched/k8s/lease.h"
#include "internal.h"

struct k8s_lease {
    k8s_client *k; /* borrowed */
    CURL *h;       /* keep-alive across rounds */
    char ns[254], name[254], identity[256];
    int64_t duration_ms, renew_deadline_ms, timeout_ms;
    k8s_lease_obs obs;
    bool held;
    char acquire_time[40];
    int64_t last_renew_ok_ms;
};

/* See lease.h. */
void k8s_lease_observe(k8s_lease_obs *obs, const json_t *lease, int64_t now_ms)
{
    if (!lease) {
        bool changed = obs->exists;
        int64_t seen = obs->observed_ms;
        memset(obs, 0, sizeof *obs);
        obs->observed_ms = changed || !seen ? now_ms : seen;
        return;
    }
    const json_t *spec = json_object_get(lease, "spec");
    const char *holder = json_string_value(json_object_get(spec, "holderIdentity"));
    const char *renew = json_string_value(json_object_get(spec, "renewTime"));
    const char *rv =
        json_string_value(json_object_get(json_object_get(lease, "metadata"), "resourceVersion"));
    json_t *d = json_object_get(spec, "leaseDurationSeconds");
    json_t *t = json_object_get(spec, "leaseTransitions");
    k8s_lease_obs next = {.exists = true};
    snprintf(next.holder, sizeof next.holder, "%s", holder ? holder : "");
    snprintf(next.renew_time, sizeof next.renew_time, "%s", renew ? renew : "");
    const char *acq = json_string_value(json_object_get(spec, "acquireTime"));
    snprintf(next.acquire_time, sizeof next.acquire_time, "%s", acq ? acq : "");
    snprintf(next.resource_version, sizeof next.resource_version, "%s", rv ? rv : "");
    /* Range-checked before scaling: a hostile value must neither overflow
     * nor make the lease never (or instantly) expire. */
    json_int_t secs = json_is_integer(d) ? json_integer_value(d) : 0;
    next.duration_ms = secs > 0 && secs <= 3600 ? (int64_t)secs * 1000 : 15000;
    next.transitions = json_is_integer(t) ? (int64_t)json_integer_value(t) : 0;
    bool changed = !obs->exists || strcmp(obs->holder, next.holder) != 0 ||
                   strcmp(obs->renew_time, next.renew_time) != 0;
    next.observed_ms = changed ? now_ms : obs->observed_ms;
    *obs = next;
}

/* See lease.h. */
k8s_lease_action k8s_lease_decide(const k8s_lease_obs *obs, const char *me, int64_t now_ms)
{
    if (!obs->exists)
        return K8S_LEASE_CREATE;
    if (strcmp(obs->holder, me) == 0)
        return K8S_LEASE_RENEW;
    if (!obs->holder[0])
        return K8S_LEASE_ACQUIRE;
    if (now_ms - obs->observed_ms > obs->duration_ms)
        return K8S_LEASE_ACQUIRE;
    return K8S_LEASE_FOLLOW;
}

/* See lease.h. */
void k8s_lease_default_identity(char *out, size_t len)
{
    const char *pod = getenv("POD_NAME");
    if (pod && *pod) {
        snprintf(out, len, "%s", pod);
        return;
    }
    char host[200] = "host";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    snprintf(out, len, "%s-%ld", host, (long)getpid());
}

/* See lease.h. */
as_err k8s_lease_new(k8s_client *k, const k8s_lease_config *cfg, k8s_lease **out, as_diag *diag)
{
    *out = NULL;
    const char *ns = cfg->ns && *cfg->ns ? cfg->ns : "kube-system";
    if (!cfg->name || !*cfg->name || strlen(cfg->name) > 253 || strlen(ns) > 253)
        return as_diag_set(diag, AS_EINVAL, "leader-elect-lease",
                           "the Lease needs a name of 1..253 characters");
    if (!cfg->identity || !*cfg->identity || strlen(cfg->identity) > 255)
        return as_diag_set(diag, AS_EINVAL, "leader-elect-identity",
                           "the holder identity must be 1..255 characters");
    int64_t dur = cfg->duration_ms > 0 ? cfg->duration_ms : 15000;
    if (dur < 1000)
        return as_diag_set(diag, AS_EINVAL, "leader-elect-lease-duration",
                           "the lease duration must be at least 1 s");
    k8s_lease *l = calloc(1, sizeof *l);
    if (!l || !(l->h = curl_easy_init())) {
        free(l);
        return AS_ENOMEM;
    }
    l->k = k;
    snprintf(l->ns, sizeof l->ns, "%s", ns);
    snprintf(l->name, sizeof l->name, "%s", cfg->name);
    snprintf(l->identity, sizeof l->identity, "%s", cfg->identity);
    l->duration_ms = dur;
    l->renew_deadline_ms = cfg->renew_deadline_ms > 0 && cfg->renew_deadline_ms < dur
                               ? cfg->renew_deadline_ms
                               : dur * 2 / 3;
    /* A round that starts just before the renew deadline must end (and
     * step down) before anyone else may take over: its two requests fit in
     * half the gap between the deadline and the duration. */
    int64_t gap = dur - l->renew_deadline_ms;
    l->timeout_ms = gap / 4 > 100 ? gap / 4 : 100;
    *out = l;
    return AS_OK;
}

/* See lease.h. */
void k8s_lease_free(k8s_lease *l)
{
    if (!l)
        return;
    curl_easy_cleanup(l->h);
    free(l);
}

/* PUT (or POST: create) the Lease with holder; *code gets the status and,
 * on 2xx, the written object is folded into obs. */
static as_err lease_write(k8s_lease *l, const char *method, const char *holder, int64_t duration_s,
                          int64_t transitions, int64_t now_ms, long *code)
{
    char now[40];
    clock_rfc3339(clock_now_us(), 6, now, sizeof now); /* metav1.MicroTime */
    if (holder[0] && !l->held)
        snprintf(l->acquire_time, sizeof l->acquire_time, "%s", now);
    json_t *meta = json_pack("{s:s,s:s}", "name", l->name, "namespace", l->ns);
    if (meta && strcmp(method, "PUT") == 0 && l->obs.resource_version[0])
        json_object_set_new(meta, "resourceVersion", json_string(l->obs.resource_version));
    json_t *doc = json_pack(
        "{s:s,s:s,s:o,s:{s:s,s:I,s:s,s:s,s:I}}", "apiVersion", "coordination.k8s.io/v1", "kind",
        "Lease", "metadata", meta, "spec", "holderIdentity", holder, "leaseDurationSeconds",
        (json_int_t)duration_s, "acquireTime", l->acquire_time[0] ? l->acquire_time : now,
        "renewTime", now, "leaseTransitions", (json_int_t)transitions);
    char *body = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!body)
        return AS_ENOMEM;
    char path[600];
    if (strcmp(method, "POST") == 0)
        snprintf(path, sizeof path, "/apis/coordination.k8s.io/v1/namespaces/%s/leases", l->ns);
    else
        snprintf(path, sizeof path, "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s", l->ns,
                 l->name);
    buf resp;
    buf_init(&resp, 1 << 20);
    as_diag d = {0};
    as_err err = k8s_do_priority(l->k, l->h, method, path, body, strlen(body), &resp, code,
                                 l->timeout_ms, &d);
    free(body);
    if (!err && *code >= 200 && *code < 300) {
        json_t *written = json_loadb(resp.data ? resp.data : "", resp.len, 0, NULL);
        if (written)
            k8s_lease_observe(&l->obs, written, now_ms);
        json_decref(written);
    }
    if (err)
        log_warn("msg=\"lease request failed\" lease=%s/%s method=%s error=\"%s\"", l->ns, l->name,
                 method, d.msg[0] ? d.msg : as_strerror(err));
    else if ((*code < 200 || *code >= 300) && *code != 409)
        log_warn("msg=\"lease write refused\" lease=%s/%s method=%s status=%ld body=\"%.200s\"",
                 l->ns, l->name, method, *code, resp.data ? resp.data : "");
    buf_free(&resp);
    return err;
}

static void set_held(k8s_lease *l, bool on)
{
    if (l->held == on)
        return;
    l->held = on;
    if (on)
        log_info("msg=\"became the leader\" identity=%s lease=%s/%s", l->identity, l->ns, l->name);
    else
        log_info("msg=\"not the leader\" identity=%s lease=%s/%s holder=%s", l->identity, l->ns,
                 l->name, l->obs.holder[0] ? l->obs.holder : "-");
}

/* past_deadline: held, and not renewed for the renew deadline at now. */
static bool past_deadline(const k8s_lease *l, int64_t now)
{
    return l->held && now - l->last_renew_ok_ms > l->renew_deadline_ms;
}

static void step_down(k8s_lease *l)
{
    log_warn("msg=\"lease not renewed within the deadline; stepping down\" lease=%s/%s "
             "deadline_ms=%lld",
             l->ns, l->name, (long long)l->renew_deadline_ms);
    set_held(l, false);
}

/* See lease.h. */
bool k8s_lease_step(k8s_lease *l, int64_t now_ms)
{
    if (past_deadline(l, now_ms)) {
        /* Late already (the elector wakes at the deadline): stop leading
         * before spending time on requests; the next round may renew. */
        step_down(l);
        return false;
    }
    int64_t t0 = clock_mono_ms();
    char path[600];
    snprintf(path, sizeof path, "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s", l->ns,
             l->name);
    buf resp;
    buf_init(&resp, 1 << 20);
    long code = 0;
    as_diag d = {0};
    as_err err = k8s_do_priority(l->k, l->h, "GET", path, NULL, 0, &resp, &code, l->timeout_ms, &d);
    json_t *obj = NULL;
    if (!err && code == 200)
        obj = json_loadb(resp.data ? resp.data : "", resp.len, 0, NULL);
    if (err || (code != 200 && code != 404) || (code == 200 && !obj)) {
        log_warn("msg=\"cannot read the lease\" lease=%s/%s status=%ld error=\"%s\"", l->ns,
                 l->name, code,
                 d.msg[0] ? d.msg
                 : err    ? as_strerror(err)
                          : "unexpected answer");
        buf_free(&resp);
        json_decref(obj);
        goto check_deadline;
    }
    buf_free(&resp);
    k8s_lease_observe(&l->obs, obj, now_ms);
    json_decref(obj);
    k8s_lease_action a = k8s_lease_decide(&l->obs, l->identity, now_ms);
    if (a == K8S_LEASE_FOLLOW) {
        set_held(l, false);
        return false;
    }
    int64_t trans = l->obs.transitions + (a == K8S_LEASE_ACQUIRE ? 1 : 0);
    err = lease_write(l, a == K8S_LEASE_CREATE ? "POST" : "PUT", l->identity, l->duration_ms / 1000,
                      trans, now_ms, &code);
    if (!err && code >= 200 && code < 300) {
        l->last_renew_ok_ms = now_ms;
        set_held(l, true);
        return true;
    }
    if (!err && code == 409) {
        /* Someone else wrote first (or created it): we did not renew, and
         * the next round reads who holds it. */
        set_held(l, false);
        return false;
    }
check_deadline:
    /* A leader that cannot renew steps down at the renew deadline, counted
     * from the start of its last successful round: before any other
     * candidate may see the lease expire (duration > renew deadline). Judged
     * at the end of this round, its requests' time included. */
    if (past_deadline(l, now_ms + (clock_mono_ms() - t0)))
        step_down(l);
    return l->held;
}

/* See lease.h. */
int64_t k8s_lease_deadline(const k8s_lease *l)
{
    return l->held ? l->last_renew_ok_ms + l->renew_deadline_ms : INT64_MAX;
}

/* See lease.h. */
bool k8s_lease_held(const k8s_lease *l)
{
    return l->held;
}

/* See lease.h. */
const char *k8s_lease_identity(const k8s_lease *l)
{
    return l->identity;
}

/* See lease.h. */
const k8s_lease_obs *k8s_lease_observed(const k8s_lease *l)
{
    return &l->obs;
}

/* See lease.h. */
void k8s_lease_release(k8s_lease *l, int64_t now_ms)
{
    if (!l->held)
        return;
    long code = 0;
    /* client-go's ReleaseOnCancel: an empty holder and a 1 s duration, so
     * a standby takes over at its next round. */
    as_err err = lease_write(l, "PUT", "", 1, l->obs.transitions, now_ms, &code);
    log_info("msg=\"lease released\" lease=%s/%s status=%ld%s", l->ns, l->name, code,
             err ? " (not written: it expires on its own)" : "");
    l->obs.holder[0] = '\0';
    set_held(l, false);
}

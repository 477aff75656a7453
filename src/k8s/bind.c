/* bind.c - pods/binding over a bounded pool of keep-alive connections;
 * the GPU device annotations' patch; a single-Pod GET. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/clock.h"
#include "agentsched/base/log.h"
#include "agentsched/k8s/bind.h"
#include "agentsched/k8s/mux.h"
#include "internal.h"

#define BIND_QUEUE_CAP         16384
#define BIND_ASYNC_WORKERS_MAX 16
#define BIND_RESP_CAP          (64 * 1024) /* kept of a patch's answer (cut, mux.h): its Status */
/* A 429/503's Retry-After is waited for before the retry, up to this: a
 * bind or patch never stalls long on one answer. */
#define RETRY_AFTER_CAP_MS 5000

/* retry_wait_ms is how long a bind or pod patch waits before retrying
 * after attempt: the bind backoff, or the server's Retry-After (ms, 0 =
 * none) when that is longer, capped at RETRY_AFTER_CAP_MS. */
static int64_t retry_wait_ms(const k8s_client *k, unsigned attempt, uint64_t *rng,
                             int64_t retry_after)
{
    int64_t ms = k8s_backoff_ms(k->cfg.bind_backoff_ms, k->cfg.bind_backoff_ms * 32, attempt, rng);
    if (retry_after > ms)
        ms = retry_after < RETRY_AFTER_CAP_MS ? retry_after : RETRY_AFTER_CAP_MS;
    return ms;
}
/* A Binding's answer is a Status object of a few hundred bytes (an
 * Event's, on the same handles, about a KiB): 96 kept handles' buffers,
 * caps included, stay near 30 MiB. */
#define KEPT_RESP_CAP (64 * 1024)

/* One queued k8s_bind_async call (strings owned). */
struct k8s_bind_job {
    char *ns, *name, *uid, *node;
    k8s_bind_done_fn done;
    void *arg;
};

/* See bind.h. */
as_err k8s_bind_init(k8s_client *k)
{
    size_t n = k->cfg.bind_concurrency;
    as_err err = AS_OK;
    k->bkept = calloc(n, sizeof *k->bkept);
    k->bhandles = calloc(n, sizeof *k->bhandles);
    k->bq = calloc(BIND_QUEUE_CAP, sizeof *k->bq);
    if (!k->bkept || !k->bhandles || !k->bq) {
        err = AS_ENOMEM;
        goto done;
    }
    k->bq_cap = BIND_QUEUE_CAP;
    for (size_t i = 0; i < n; i++) {
        if ((err = k8s_kept_init(&k->bkept[i], KEPT_RESP_CAP)))
            goto done;
        k->bhandles[i] = &k->bkept[i];
    }
    k->nbfree = n;
done:
    if (err) {
        /* Leave nothing for k8s_bind_shutdown to wait for: with bhandles
         * set and nbfree short of bind_concurrency it would wait forever
         * for handles that were never handed out. */
        for (size_t i = 0; k->bkept && i < n; i++)
            k8s_kept_fini(&k->bkept[i]);
        free(k->bkept);
        k->bkept = NULL;
        free(k->bhandles);
        k->bhandles = NULL;
    }
    return err;
}

static void job_free(k8s_bind_job *j)
{
    free(j->ns);
    free(j->name);
    free(j->uid);
    free(j->node);
    memset(j, 0, sizeof *j);
}

/* See bind.h. */
void k8s_bind_shutdown(k8s_client *k)
{
    pthread_mutex_lock(&k->bmu);
    pthread_cond_broadcast(&k->bqcond);
    pthread_cond_broadcast(&k->bcond);
    pthread_mutex_unlock(&k->bmu);
    for (size_t i = 0; i < k->nbworkers; i++)
        pthread_join(k->bworkers[i], NULL);
    free(k->bworkers);
    k->bworkers = NULL;
    k->nbworkers = 0;
    /* Jobs never started fail, so their callers release the pods. */
    pthread_mutex_lock(&k->bmu);
    while (k->bq && k->bq_len > 0) {
        k8s_bind_job j = k->bq[k->bq_head];
        k->bq_head = (k->bq_head + 1) % k->bq_cap;
        k->bq_len--;
        pthread_mutex_unlock(&k->bmu);
        if (j.done) {
            as_diag d;
            as_diag_set(&d, AS_EIO, NULL, "client stopped before the bind was sent");
            j.done(j.arg, AS_EIO, &d);
        }
        job_free(&j);
        pthread_mutex_lock(&k->bmu);
    }
    /* Synchronous binds in flight abort on stop; wait for their handles. */
    while (k->bhandles && k->nbfree < k->cfg.bind_concurrency)
        pthread_cond_wait(&k->bcond, &k->bmu);
    pthread_mutex_unlock(&k->bmu);
    if (k->bkept)
        for (size_t i = 0; i < k->cfg.bind_concurrency; i++)
            k8s_kept_fini(&k->bkept[i]);
    free(k->bkept);
    k->bkept = NULL;
    free(k->bhandles);
    k->bhandles = NULL;
    free(k->bq);
    k->bq = NULL;
}

/* handle_take takes a free bind handle, with wait until one is free;
 * NULL when the client stops, or without wait when none is free. */
static k8s_kept *handle_take(k8s_client *k, bool wait)
{
    k8s_kept *h = NULL;
    pthread_mutex_lock(&k->bmu);
    while (wait && k->nbfree == 0 && !k8s_stopping(k))
        pthread_cond_wait(&k->bcond, &k->bmu);
    if (k->nbfree && !k8s_stopping(k) && k->bhandles)
        h = k->bhandles[--k->nbfree];
    pthread_mutex_unlock(&k->bmu);
    return h;
}

/* handle_put gives a handle back to the pool (last in, first out: a
 * thread that gives one back and takes one again gets the same
 * connection unless another thread took it meanwhile, so the connections
 * used most stay warm) and wakes a thread waiting for one. */
static void handle_put(k8s_client *k, k8s_kept *h)
{
    pthread_mutex_lock(&k->bmu);
    k->bhandles[k->nbfree++] = h;
    pthread_cond_broadcast(&k->bcond);
    pthread_mutex_unlock(&k->bmu);
}

/* Connections one k8s_bind_keep_warm call opens or refreshes at most, so
 * that the API server sees a few dozen handshakes a second rather than a
 * whole pool's at once. */
#define WARM_PER_CALL   32
#define WARM_TIMEOUT_MS 5000

/* warm_pick takes off the free stack (bmu held) the handles this call
 * warms into out (at most WARM_PER_CALL), bottom first (the least
 * recently used): open ones idle cfg.bind_warm_idle_ms and closed ones
 * while fewer than want are open or busy. Returns how many. */
static size_t warm_pick(k8s_client *k, size_t want, uint64_t now, k8s_kept **out)
{
    size_t open = k->cfg.bind_concurrency - k->nbfree; /* busy ones hold a connection */
    for (size_t i = 0; i < k->nbfree; i++)
        open += k->bhandles[i]->wire.h != NULL;
    size_t to_open = want > open ? want - open : 0;
    uint64_t idle_ns = (uint64_t)k->cfg.bind_warm_idle_ms * 1000000u;
    size_t n = 0;
    for (size_t i = 0; i < k->nbfree && n < WARM_PER_CALL;) {
        k8s_kept *h = k->bhandles[i];
        bool pick = h->wire.h ? now - h->wire.done_ns >= idle_ns : to_open > 0;
        if (!pick) {
            i++;
            continue;
        }
        if (!h->wire.h)
            to_open--;
        out[n++] = h;
        memmove(&k->bhandles[i], &k->bhandles[i + 1], (k->nbfree - i - 1) * sizeof *k->bhandles);
        k->nbfree--;
    }
    return n;
}

/* warm_one sends h's GET of /version (connecting h when closed) and
 * counts it; false when it failed, which is logged as a warning when the
 * last one succeeded (at debug otherwise). Only k8s_bind_keep_warm's
 * caller runs it. */
static bool warm_one(k8s_client *k, k8s_kept *h)
{
    bool was_open = h->wire.h != NULL;
    long status = 0;
    as_diag d = {{0}, {0}};
    as_err err = k8s_kept_get(k, h, "/version", &status, WARM_TIMEOUT_MS, &d);
    if (!err && status == 200) {
        if (k->bwarm_failing)
            log_info("msg=\"bind connections kept open again\"");
        k->bwarm_failing = false;
        k8s_count(k, was_open ? &k->st.bind_warm_refreshed : &k->st.bind_warm_opened, 1);
        return true;
    }
    if (!err)
        k8s_wire_close(&h->wire); /* not a connection to keep */
    if (!k->bwarm_failing)
        log_warn("msg=\"bind connections not kept open: GET /version failed; bursts of "
                 "bindings pay a TLS handshake per connection until it answers (a 403: "
                 "RBAC no longer grants /version to authenticated users, the "
                 "system:public-info-viewer role; --bind-warm 0 turns this off)\" "
                 "status=%ld error=\"%s\"",
                 status, err ? d.msg : "unexpected status");
    else
        log_debug("msg=\"bind connection not warmed\" status=%ld error=\"%s\"", status,
                  err ? d.msg : "unexpected status");
    k->bwarm_failing = true;
    k8s_count(k, &k->st.bind_warm_failed, 1);
    return false;
}

/* See bind.h. */
size_t k8s_bind_keep_warm(k8s_client *k)
{
    size_t want =
        k->cfg.bind_warm < k->cfg.bind_concurrency ? k->cfg.bind_warm : k->cfg.bind_concurrency;
    if (!want || !k->bhandles || !k->wire_host)
        return 0;
    k8s_kept *picked[WARM_PER_CALL];
    pthread_mutex_lock(&k->bmu);
    size_t n = k8s_stopping(k) ? 0 : warm_pick(k, want, clock_mono_ns(), picked);
    pthread_mutex_unlock(&k->bmu);
    /* After one failure the rest wait for the next call: an API server
     * that is down is not sent a connection per handle each second. */
    size_t warmed = 0;
    bool failed = false;
    for (size_t i = 0; i < n; i++) {
        if (!failed && warm_one(k, picked[i]))
            warmed++;
        else
            failed = true;
        handle_put(k, picked[i]);
    }
    return warmed;
}

/* See bind.h. */
bool k8s_conflict_node(const char *body, size_t len, char *out, size_t outlen)
{
    static const char pat[] = "already assigned to node ";
    const char *end = body + len;
    const char *p = body;
    out[0] = 0;
    while (p < end) {
        const char *hit = memmem(p, (size_t)(end - p), pat, sizeof pat - 1);
        if (!hit)
            return false;
        const char *q = hit + sizeof pat - 1;
        /* Go's %q quoting; inside a JSON string body it arrives as \" . */
        if (q < end && *q == '\\')
            q++;
        if (q < end && *q == '"')
            q++;
        const char *s = q;
        while (q < end && *q != '"' && *q != '\\' && *q != ' ' && *q != ',' && *q != '}')
            q++;
        size_t n = (size_t)(q - s);
        if (n > 0 && n < outlen) {
            memcpy(out, s, n);
            out[n] = 0;
            return true;
        }
        p = hit + 1;
    }
    return false;
}

static const char *status_message(const buf *b, char *tmp, size_t len)
{
    tmp[0] = 0;
    json_t *st = b->len ? json_loadb(b->data, b->len, 0, NULL) : NULL;
    const char *m = json_string_value(json_object_get(st, "message"));
    if (m)
        snprintf(tmp, len, "%s", m);
    else if (b->len)
        snprintf(tmp, len, "%.*s", (int)(b->len > 200 ? 200 : b->len), b->data);
    json_decref(st);
    return tmp;
}

/* Appended to the error of a bind given up while its outcome was unknown. */
#define UNKNOWN_NOTE                                                                               \
    " (outcome unknown: an earlier attempt may have been applied; the watch will show the "        \
    "binding if it was)"

/* note_unknown marks a bind's outcome unknown, counting and logging the
 * first time per bind. */
static void note_unknown(k8s_client *k, bool *unknown, const char *ns, const char *name,
                         const char *node, const char *why)
{
    if (*unknown)
        return;
    *unknown = true;
    k8s_count(k, &k->st.bind_unknown, 1);
    log_warn("msg=\"bind outcome unknown; retrying the same binding until the API server "
             "answers\" pod=%s/%s node=%s err=\"%s\"",
             ns, name, node, why);
}

/* give_up: the retry budget is spent and, when the outcome is unknown,
 * its retry window too. */
static bool give_up(const k8s_client *k, unsigned attempt, bool unknown, uint64_t unknown_until)
{
    return attempt >= k->cfg.bind_retries && !(unknown && clock_mono_ns() < unknown_until);
}

/* unknown_window_end: when the window of a bind whose outcome turns
 * unknown now closes, half the assumed-pod TTL on (bind_post says why). */
static uint64_t unknown_window_end(const k8s_client *k)
{
    return clock_mono_ns() + (uint64_t)(k->cfg.assumed_ttl_ms / 2) * 1000000ull;
}

/* unheard_take removes the binding's entry from the unheard table and
 * gives the end of its unknown window; 0 when there is none. */
static uint64_t unheard_take(k8s_client *k, uint64_t key)
{
    /* the common case, nothing lost, costs no lock */
    if (!__atomic_load_n(&k->nunheard, __ATOMIC_ACQUIRE))
        return 0;
    uint64_t until = 0;
    pthread_mutex_lock(&k->bmu);
    for (size_t i = 0; i < k->nunheard; i++) {
        if (k->unheard_key[i] != key)
            continue;
        until = k->unheard_until[i];
        size_t last = k->nunheard - 1;
        k->unheard_key[i] = k->unheard_key[last];
        k->unheard_until[i] = k->unheard_until[last];
        __atomic_store_n(&k->nunheard, last, __ATOMIC_RELEASE);
        break;
    }
    pthread_mutex_unlock(&k->bmu);
    return until;
}

/* unheard_put remembers a binding whose answer was lost until its unknown
 * window closes at until. Closed windows are dropped first; a full table
 * gives up the entry whose window closes soonest (logged), which then
 * settles within the usual retry budget. */
static void unheard_put(k8s_client *k, uint64_t key, uint64_t until)
{
    uint64_t now = clock_mono_ns();
    pthread_mutex_lock(&k->bmu);
    size_t n = 0, soonest = 0;
    for (size_t i = 0; i < k->nunheard; i++) {
        if (k->unheard_until[i] <= now || k->unheard_key[i] == key)
            continue;
        k->unheard_key[n] = k->unheard_key[i];
        k->unheard_until[n] = k->unheard_until[i];
        if (k->unheard_until[n] < k->unheard_until[soonest])
            soonest = n;
        n++;
    }
    if (n == K8S_UNHEARD_MAX) {
        log_warn("msg=\"%d bindings with lost answers remembered; forgetting the oldest: its bind "
                 "retries only the usual budget\"",
                 K8S_UNHEARD_MAX);
        n--;
        k->unheard_key[soonest] = k->unheard_key[n];
        k->unheard_until[soonest] = k->unheard_until[n];
    }
    k->unheard_key[n] = key;
    k->unheard_until[n] = until;
    __atomic_store_n(&k->nunheard, n + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&k->bmu);
}

/* k8s_bind_try's wait for its answer: far above a healthy API server's
 * bind (a few ms) and short enough that its caller keeps going. An
 * attempt that timed out may have been applied; k8s_bind settles it. */
#define TRY_TIMEOUT_MS 250

/* frame_binding writes the Binding's path and body into h's scratch;
 * AS_ENOMEM past their caps. */
static as_err frame_binding(k8s_kept *h, const char *ns, const char *name, const char *uid,
                            const char *node)
{
    buf *body = &h->body, *path = &h->path;
    buf_reset(body);
    buf_reset(path);
    buf_puts(path, "/api/v1/namespaces/");
    k8s_path_segment(path, ns);
    buf_puts(path, "/pods/");
    k8s_path_segment(path, name);
    buf_puts(path, "/binding");
    buf_puts(body, "{\"apiVersion\":\"v1\",\"kind\":\"Binding\",\"metadata\":{\"name\":");
    buf_json_cstr(body, name);
    buf_puts(body, ",\"namespace\":");
    buf_json_cstr(body, ns);
    if (uid && *uid) {
        buf_puts(body, ",\"uid\":");
        buf_json_cstr(body, uid);
    }
    buf_puts(body, "},\"target\":{\"kind\":\"Node\",\"name\":");
    buf_json_cstr(body, node);
    buf_puts(body, "}}");
    return path->err || body->err ? AS_ENOMEM : AS_OK;
}

/* bind_checked: the arguments every bind needs, else why not. */
static as_err bind_checked(const k8s_client *k, const char *ns, const char *name, const char *node,
                           as_diag *diag)
{
    if (!k)
        return as_diag_set(diag, AS_EUNSUPPORTED, NULL, "not connected to an API server");
    if (!ns || !*ns || !name || !*name || !node || !*node)
        return as_diag_set(diag, AS_EINVAL, NULL, "bind needs a namespace, a pod name and a node");
    return AS_OK;
}

/* bind_post is k8s_bind, and with once k8s_bind_try: where k8s_bind would
 * wait (for a handle, or before a retry) it answers AS_EAGAIN. sent: a
 * handle on which k8s_bind_try_send sent this Binding; its answer is the
 * first attempt's (once only), and the handle goes back to the pool. */
static as_err bind_post(k8s_client *k, const char *ns, const char *name, const char *uid,
                        const char *node, bool once, k8s_kept *sent, as_diag *diag)
{
    as_err err = bind_checked(k, ns, name, node, diag);
    if (err)
        return err;
    k8s_kept *h = sent ? sent : handle_take(k, !once);
    if (!h && once && !k8s_stopping(k))
        return as_diag_set(diag, AS_EAGAIN, NULL, "bind of %s/%s not sent: every handle busy", ns,
                           name);
    if (!h) {
        err = as_diag_set(diag, AS_EIO, NULL, "client stopping; bind of %s/%s not sent", ns, name);
        goto out;
    }
    /* the handle's own scratch: nothing allocated per bind */
    buf *body = &h->body, *resp = &h->resp, *path = &h->path;
    /* the pod and the node: only the same binding, sent again, inherits a
     * lost attempt's window (a collision merely retries another longer) */
    uint64_t key = k8s_pod_key_hash(ns, name, uid, node);
    uint64_t heard_until = unheard_take(k, key);
    if (!sent && frame_binding(h, ns, name, uid, node) != AS_OK) {
        err = AS_ENOMEM;
        goto done;
    }
    uint64_t rng = clock_mono_ns() ^ (uint64_t)(uintptr_t)h->h;
    /* Once an attempt may have been applied without our hearing the answer
     * (the connection broke after the request went out, or the API server
     * timed out: 504), releasing the pod could free capacity the pod holds
     * in etcd, and the cache would hand it out again before the watch shows
     * the binding. So the same binding is retried past the usual budget,
     * until an answer settles it (201, or 409 naming this node when the
     * lost attempt went through) or half the assumed-pod TTL has passed
     * (the cache forgets the assumption at the full TTL anyway). A try's
     * lost answer leaves its window to this bind (counted and logged
     * then), so that a caller retrying with k8s_bind does not release a
     * pod the try may have bound. */
    bool unknown = heard_until > clock_mono_ns();
    uint64_t unknown_until = unknown ? heard_until : unknown_window_end(k);
    char msg[256];
    for (unsigned attempt = 0;; attempt++) {
        long status = 0;
        int64_t retry_after = 0;
        as_diag d = {{0}, {0}};
        buf_reset(resp);
        unsigned sends = 0;
        if (sent && attempt == 0) {
            sends = 1;
            err = k8s_kept_post_recv(k, h, resp, &status, TRY_TIMEOUT_MS, &d);
        } else if (once) {
            err = k8s_do_kept_try(k, h, path->data, body->data, body->len, resp, &status,
                                  &retry_after, &sends, TRY_TIMEOUT_MS, &d);
        } else {
            err = k8s_do_kept(k, h, path->data, body->data, body->len, resp, &status, &retry_after,
                              &sends, &d);
        }
        if (sends > 1)
            note_unknown(k, &unknown, ns, name, node,
                         "the connection died unanswered and the binding was sent again");
        if (once && err == AS_EAGAIN) {
            as_diag_set(diag, AS_EAGAIN, NULL, "bind of %s/%s not sent: %s", ns, name, d.msg);
            if (unknown)
                unheard_put(k, key, unknown_until);
            goto done;
        }
        if (err) {
            if (k8s_stopping(k)) {
                err = as_diag_set(diag, AS_EIO, NULL, "client stopping; bind of %s/%s aborted", ns,
                                  name);
                goto done;
            }
            bool retry = err == AS_EIO || err == AS_ETIMEOUT;
            /* A request never sent (no connection) cannot have been applied. */
            if (retry && h->sent > 0)
                note_unknown(k, &unknown, ns, name, node, d.msg);
            if (!retry || give_up(k, attempt, unknown, unknown_until)) {
                err = as_diag_set(diag, err, NULL, "bind %s/%s to %s: %s%s", ns, name, node, d.msg,
                                  unknown ? UNKNOWN_NOTE : "");
                goto done;
            }
        } else if (status == 200 || status == 201) {
            err = AS_OK;
            goto done;
        } else if (status == 409) {
            char other[256];
            if (k8s_conflict_node(resp->data ? resp->data : "", resp->len, other, sizeof other)) {
                if (!strcmp(other, node)) {
                    log_debug("msg=\"bind already done\" pod=%s/%s node=%s", ns, name, node);
                    err = AS_OK;
                    goto done;
                }
                err = as_diag_set(diag, AS_ECONFLICT, NULL,
                                  "pod %s/%s is already bound to node %s, not %s", ns, name, other,
                                  node);
                goto done;
            }
            /* A 409 that names no node is not "bound elsewhere": the API
             * server also answers 409 when etcd fails mid-write ("rpc error:
             * ... Unavailable"), where the write may or may not have
             * landed. Retried like a 504; refused for good only when the
             * budget and the unknown window are spent. */
            const char *why = status_message(resp, msg, sizeof msg);
            note_unknown(k, &unknown, ns, name, node, why);
            if (give_up(k, attempt, unknown, unknown_until)) {
                err = as_diag_set(diag, AS_EHTTP, NULL,
                                  "bind %s/%s to %s refused (409) after %u attempts: %s%s", ns,
                                  name, node, attempt + 1, why, UNKNOWN_NOTE);
                goto done;
            }
        } else if (status == 404) {
            err =
                as_diag_set(diag, AS_ENOTFOUND, NULL, "pod %s/%s no longer exists (404)", ns, name);
            goto done;
        } else if (unknown && status != 429 && status < 500) {
            /* Any other refusal says nothing about the attempt that may have
             * been applied: a kube-apiserver just restarted answers 403 to
             * everyone until its RBAC caches are filled (seen in
             * e2e/apiserver_restart), and the pod may already be bound. Keep
             * asking until an answer settles it or the window closes. */
            if (give_up(k, attempt, unknown, unknown_until)) {
                err = as_diag_set(diag, status == 401 || status == 403 ? AS_EAUTH : AS_EHTTP, NULL,
                                  "bind %s/%s to %s refused (%ld) after %u attempts: %s%s", ns,
                                  name, node, status, attempt + 1,
                                  status_message(resp, msg, sizeof msg), UNKNOWN_NOTE);
                goto done;
            }
        } else if (status == 401 || status == 403) {
            err = as_diag_set(diag, AS_EAUTH, NULL,
                              "bind %s/%s refused (%ld): %s; the scheduler needs create on "
                              "pods/binding",
                              ns, name, status, status_message(resp, msg, sizeof msg));
            goto done;
        } else if (status == 429 || status >= 500) {
            if (status == 504)
                note_unknown(k, &unknown, ns, name, node, "HTTP 504 (the API server timed out)");
            if (give_up(k, attempt, unknown, unknown_until)) {
                err = as_diag_set(diag, AS_EHTTP, NULL,
                                  "bind %s/%s to %s failed after %u attempts (%ld): %s%s", ns, name,
                                  node, attempt + 1, status, status_message(resp, msg, sizeof msg),
                                  unknown ? UNKNOWN_NOTE : "");
                goto done;
            }
        } else {
            err = as_diag_set(diag, AS_EHTTP, NULL, "bind %s/%s to %s refused (%ld): %s", ns, name,
                              node, status, status_message(resp, msg, sizeof msg));
            goto done;
        }
        if (once) {
            /* not settled: the caller binds again with k8s_bind, whose first
             * attempt is this one's retry (a 201 or a 409 naming this node
             * then settles an attempt that went through unheard) */
            err = as_diag_set(diag, AS_EAGAIN, NULL, "bind %s/%s to %s not settled: %s", ns, name,
                              node, status ? status_message(resp, msg, sizeof msg) : d.msg);
            if (unknown)
                unheard_put(k, key, unknown_until);
            goto done;
        }
        k8s_count(k, &k->st.bind_retries, 1);
        if (!k8s_sleep_ms(k, retry_wait_ms(k, attempt, &rng, retry_after))) {
            err =
                as_diag_set(diag, AS_EIO, NULL, "client stopping; bind of %s/%s aborted", ns, name);
            goto done;
        }
    }
done:
    handle_put(k, h);
out:
    if (err == AS_OK)
        k8s_count(k, &k->st.binds_ok, 1);
    else if (err != AS_EAGAIN)
        k8s_count(k, &k->st.binds_failed, 1);
    return err;
}

/* See bind.h. */
as_err k8s_bind(k8s_client *k, const char *ns, const char *name, const char *uid, const char *node,
                as_diag *diag)
{
    return bind_post(k, ns, name, uid, node, false, NULL, diag);
}

/* See bind.h. */
as_err k8s_bind_try(k8s_client *k, const char *ns, const char *name, const char *uid,
                    const char *node, as_diag *diag)
{
    return bind_post(k, ns, name, uid, node, true, NULL, diag);
}

/* See bind.h. */
as_err k8s_bind_try_send(k8s_client *k, const char *ns, const char *name, const char *uid,
                         const char *node, k8s_kept **sent, as_diag *diag)
{
    *sent = NULL;
    as_err err = bind_checked(k, ns, name, node, diag);
    if (err)
        return err;
    k8s_kept *h = handle_take(k, false);
    if (!h)
        return as_diag_set(diag, AS_EAGAIN, NULL, "bind of %s/%s not sent: %s", ns, name,
                           k8s_stopping(k) ? "client stopping" : "every handle busy");
    as_diag d = {{0}, {0}};
    h->sent = 0; /* what this send writes, not an earlier one's */
    err = frame_binding(h, ns, name, uid, node);
    if (!err)
        err = k8s_kept_post_add(k, h, h->path.data, h->body.data, h->body.len, &d);
    if (!err)
        err = k8s_kept_post_flush(k, h, false, &d);
    if (!err) {
        *sent = h;
        return AS_OK;
    }
    h->queued = 0;
    /* bytes of this Binding left only when the send itself failed */
    bool left = err != AS_EAGAIN && h->sent > 0;
    handle_put(k, h);
    if (err == AS_ENOMEM || err == AS_EUNSUPPORTED)
        return as_diag_set(diag, err, NULL, "bind of %s/%s not sent: %s", ns, name,
                           err == AS_ENOMEM ? "out of memory" : "needs libcurl's requests");
    /* Not settled: when bytes left, the binding may have been applied; the
     * k8s_bind that settles it (201, or 409 naming this node) keeps to
     * the same binding for its unknown window. */
    if (left) {
        bool unknown = false;
        note_unknown(k, &unknown, ns, name, node, d.msg);
        unheard_put(k, k8s_pod_key_hash(ns, name, uid, node), unknown_window_end(k));
    }
    return as_diag_set(diag, AS_EAGAIN, NULL, "bind of %s/%s not settled: %s", ns, name, d.msg);
}

/* See bind.h. */
bool k8s_bind_try_answered(k8s_kept *sent)
{
    return k8s_wire_answered(&sent->wire);
}

/* See bind.h. */
as_err k8s_bind_try_recv(k8s_client *k, k8s_kept *sent, const char *ns, const char *name,
                         const char *uid, const char *node, as_diag *diag)
{
    return bind_post(k, ns, name, uid, node, true, sent, diag);
}

static void *bind_worker(void *arg)
{
    k8s_client *k = arg;
    pthread_setname_np(pthread_self(), "as-k8s-bind");
    pthread_mutex_lock(&k->bmu);
    for (;;) {
        while (k->bq_len == 0 && !k8s_stopping(k))
            pthread_cond_wait(&k->bqcond, &k->bmu);
        if (k8s_stopping(k))
            break;
        k8s_bind_job j = k->bq[k->bq_head];
        k->bq_head = (k->bq_head + 1) % k->bq_cap;
        k->bq_len--;
        pthread_mutex_unlock(&k->bmu);
        as_diag d = {{0}, {0}};
        as_err err = k8s_bind(k, j.ns, j.name, j.uid, j.node, &d);
        if (j.done)
            j.done(j.arg, err, &d);
        job_free(&j);
        pthread_mutex_lock(&k->bmu);
    }
    pthread_mutex_unlock(&k->bmu);
    return NULL;
}

/* See bind.h. */
as_err k8s_bind_async(k8s_client *k, const char *ns, const char *name, const char *uid,
                      const char *node, k8s_bind_done_fn done, void *arg)
{
    if (!ns || !name || !node)
        return AS_EINVAL;
    k8s_bind_job j = {0};
    j.ns = strdup(ns);
    j.name = strdup(name);
    j.uid = strdup(uid ? uid : "");
    j.node = strdup(node);
    j.done = done;
    j.arg = arg;
    if (!j.ns || !j.name || !j.uid || !j.node) {
        job_free(&j);
        return AS_ENOMEM;
    }
    as_err err = AS_OK;
    pthread_mutex_lock(&k->bmu);
    if (k8s_stopping(k) || !k->bq) {
        err = AS_EINVAL;
    } else if (k->bq_len >= k->bq_cap) {
        err = AS_ELIMIT;
    } else {
        if (!k->bworkers) {
            size_t n = k->cfg.bind_concurrency < BIND_ASYNC_WORKERS_MAX ? k->cfg.bind_concurrency
                                                                        : BIND_ASYNC_WORKERS_MAX;
            k->bworkers = calloc(n, sizeof *k->bworkers);
            for (size_t i = 0; k->bworkers && i < n; i++) {
                if (pthread_create(&k->bworkers[i], NULL, bind_worker, k) != 0)
                    break;
                k->nbworkers++;
            }
            if (!k->nbworkers)
                err = AS_ENOMEM;
        }
        if (!err) {
            k->bq[(k->bq_head + k->bq_len) % k->bq_cap] = j;
            k->bq_len++;
            pthread_cond_signal(&k->bqcond);
        }
    }
    pthread_mutex_unlock(&k->bmu);
    if (err)
        job_free(&j);
    return err;
}

/* See bind.h. */
as_err k8s_patch_status(long status, const char *resp, size_t len, const char *ns, const char *name,
                        bool *retry, as_diag *diag)
{
    char msg[256];
    buf b = {.data = (char *)resp, .len = resp ? len : 0};
    *retry = false;
    if (status >= 200 && status < 300)
        return AS_OK;
    const char *why = status_message(&b, msg, sizeof msg);
    if (status == 409)
        return as_diag_set(diag, AS_ECONFLICT, NULL,
                           "pod %s/%s changed since agentsched read it (409): %s", ns, name, why);
    if (status == 422 && resp && memmem(resp, len, "metadata.uid", 12))
        return as_diag_set(diag, AS_ECONFLICT, NULL,
                           "pod %s/%s is another pod now (its uid changed: 422): %s", ns, name,
                           why);
    if (status == 404)
        return as_diag_set(diag, AS_ENOTFOUND, NULL, "pod %s/%s no longer exists (404)", ns, name);
    if (status == 401 || status == 403)
        return as_diag_set(diag, AS_EAUTH, NULL,
                           "patch of pod %s/%s refused (%ld): %s; the scheduler needs patch on "
                           "pods to write GPU device annotations",
                           ns, name, status, why);
    *retry = status == 429 || status >= 500;
    return as_diag_set(diag, AS_EHTTP, NULL, "patch of pod %s/%s failed (%ld): %s", ns, name,
                       status, why);
}

/* See bind.h. */
as_err k8s_patch_pod(k8s_client *k, const char *ns, const char *name, const char *body, size_t len,
                     as_diag *diag)
{
    if (!k)
        return as_diag_set(diag, AS_EUNSUPPORTED, NULL, "not connected to an API server");
    if (!ns || !*ns || !name || !*name || !body)
        return as_diag_set(diag, AS_EINVAL, NULL, "a pod patch needs a namespace, a name, a body");
    buf path, resp;
    buf_init(&path, 1024);
    buf_init(&resp, BIND_RESP_CAP);
    buf_puts(&path, "/api/v1/namespaces/");
    k8s_path_segment(&path, ns);
    buf_puts(&path, "/pods/");
    k8s_path_segment(&path, name);
    as_err err = path.err;
    uint64_t rng = clock_mono_ns() ^ (uint64_t)(uintptr_t)&path;
    for (unsigned attempt = 0; !err; attempt++) {
        long status = 0;
        int64_t retry_after = 0;
        bool retry = false;
        as_diag d = {{0}, {0}};
        buf_reset(&resp);
        err = k8s_mux_patch(k, path.data, "application/merge-patch+json", body, len, &resp, &status,
                            &retry_after, &d);
        if (err) {
            retry = err == AS_EIO || err == AS_ETIMEOUT;
            err = as_diag_set(diag, err == AS_ETIMEOUT ? AS_EIO : err, NULL,
                              "patch of pod %s/%s: %s", ns, name, d.msg);
        } else {
            err = k8s_patch_status(status, resp.data, resp.len, ns, name, &retry, diag);
        }
        if (!err || !retry || attempt >= k->cfg.bind_retries || k8s_stopping(k))
            break;
        k8s_count(k, &k->st.bind_retries, 1);
        if (!k8s_sleep_ms(k, retry_wait_ms(k, attempt, &rng, retry_after)))
            break;
        err = AS_OK;
    }
    buf_free(&path);
    buf_free(&resp);
    return err;
}

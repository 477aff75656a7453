/* events.c - v1 Events (Scheduled / FailedScheduling), rate-limited per pod. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/clock.h"
#include "agentsched/base/log.h"
#include "agentsched/k8s/events.h"
#include "internal.h"

#define ERATE_SLOTS   8192
#define EVENT_MSG_MAX 1024

/* One queued Event (strings owned); at_ms stamps it when posted. */
struct k8s_event_job {
    char *ns, *name, *uid, *type, *reason, *message;
    int64_t at_ms;
};

/* See events.h. */
as_err k8s_events_init(k8s_client *k)
{
    k->eq_cap = k->cfg.event_queue;
    k->eq = calloc(k->eq_cap, sizeof *k->eq);
    k->erate_n = ERATE_SLOTS;
    k->erate_key = calloc(k->erate_n, sizeof *k->erate_key);
    k->erate_ms = calloc(k->erate_n, sizeof *k->erate_ms);
    if (!k->eq || !k->erate_key || !k->erate_ms)
        return AS_ENOMEM;
    return AS_OK;
}

static void ejob_free(k8s_event_job *j)
{
    free(j->ns);
    free(j->name);
    free(j->uid);
    free(j->type);
    free(j->reason);
    free(j->message);
    memset(j, 0, sizeof *j);
}

/* See events.h. */
void k8s_events_shutdown(k8s_client *k)
{
    pthread_mutex_lock(&k->emu);
    pthread_cond_broadcast(&k->econd);
    bool running = k->erunning;
    pthread_mutex_unlock(&k->emu);
    if (running)
        pthread_join(k->ethread, NULL);
    k->erunning = false;
    while (k->eq && k->eq_len > 0) {
        ejob_free(&k->eq[k->eq_head]);
        k->eq_head = (k->eq_head + 1) % k->eq_cap;
        k->eq_len--;
    }
    free(k->eq);
    k->eq = NULL;
    free(k->erate_key);
    k->erate_key = NULL;
    free(k->erate_ms);
    k->erate_ms = NULL;
}

/* appends the Event's name, client-go's recorder's "<object>.<unix nanos
 * in hex>" (unique enough), the object's name cut at 250 bytes. */
static void event_name(buf *b, const char *name, uint64_t nanos)
{
    char t[256 + 20], *o = t;
    size_t n = strlen(name);
    if (n > 250)
        n = 250;
    memcpy(o, name, n);
    o += n;
    *o++ = '.';
    char hx[17];
    int i = 16;
    hx[i] = 0;
    do {
        hx[--i] = "0123456789abcdef"[nanos & 15];
        nanos >>= 4;
    } while (nanos);
    memcpy(o, hx + i, (size_t)(16 - i));
    o += 16 - i;
    buf_json_str(b, t, (size_t)(o - t));
}

static as_err event_body(k8s_client *k, const k8s_event_job *j, buf *b)
{
    char ts[32];
    clock_rfc3339(j->at_ms * 1000, 0, ts, sizeof ts);
    buf_puts(b, "{\"apiVersion\":\"v1\",\"kind\":\"Event\",\"metadata\":{\"name\":");
    event_name(b, j->name, (uint64_t)j->at_ms * 1000000ull + (clock_mono_ns() % 1000000ull));
    buf_puts(b, ",\"namespace\":");
    buf_json_cstr(b, j->ns);
    buf_puts(b, "},\"involvedObject\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"namespace\":");
    buf_json_cstr(b, j->ns);
    buf_puts(b, ",\"name\":");
    buf_json_cstr(b, j->name);
    if (j->uid && *j->uid) {
        buf_puts(b, ",\"uid\":");
        buf_json_cstr(b, j->uid);
    }
    buf_puts(b, "},\"reason\":");
    buf_json_cstr(b, j->reason);
    buf_puts(b, ",\"message\":");
    buf_json_cstr(b, j->message);
    buf_puts(b, ",\"type\":");
    buf_json_cstr(b, j->type);
    buf_puts(b, ",\"source\":{\"component\":");
    buf_json_cstr(b, k->scheduler_name);
    buf_puts(b, "},\"firstTimestamp\":\"");
    buf_puts(b, ts);
    buf_puts(b, "\",\"lastTimestamp\":\"");
    buf_puts(b, ts);
    buf_puts(b, "\",\"count\":1}");
    return b->err;
}

/* frame writes j's request path and body into kh's scratch. */
static as_err frame(k8s_client *k, k8s_kept *kh, const k8s_event_job *j)
{
    buf *body = &kh->body, *path = &kh->path;
    buf_reset(body);
    buf_reset(path);
    buf_puts(path, "/api/v1/namespaces/");
    k8s_path_segment(path, j->ns);
    buf_puts(path, "/events");
    as_err err = event_body(k, j, body);
    return !err && path->err ? AS_ENOMEM : err;
}

/* tally counts an Event's outcome: posted on a 200 or 201 answer, else
 * dropped (logged, with j's pod when the caller still has it). */
static void tally(k8s_client *k, as_err err, long status, const k8s_event_job *j, const as_diag *d)
{
    if (!err && (status == 200 || status == 201)) {
        k8s_count(k, &k->st.events_posted, 1);
        return;
    }
    k8s_count(k, &k->st.events_dropped, 1);
    log_debug("msg=\"event not posted\" pod=%s/%s reason=%s status=%ld err=\"%s\"", j ? j->ns : "?",
              j ? j->name : "?", j ? j->reason : "?", status, d->msg);
}

/* post_one posts j on kept handle kh (its scratch buffers) and counts the
 * outcome. Never retried: a late Event says nothing the pod does not. */
static void post_one(k8s_client *k, k8s_kept *kh, const k8s_event_job *j)
{
    buf *body = &kh->body, *resp = &kh->resp, *path = &kh->path;
    buf_reset(resp);
    long status = 0;
    as_diag d = {{0}, {0}};
    as_err err = frame(k, kh, j);
    if (!err)
        err = k8s_do_kept(k, kh, path->data, body->data, body->len, resp, &status, NULL, NULL, &d);
    tally(k, err, status, j, &d);
}

/* tally_lost counts n Events whose answers err lost as dropped. */
static void tally_lost(k8s_client *k, as_err err, unsigned n, const as_diag *d)
{
    for (unsigned i = 0; i < n; i++)
        tally(k, err, 0, NULL, d);
}

/* flush sends the Events added on kh; those a failed send lost count as
 * dropped. */
static void flush(k8s_client *k, k8s_kept *kh)
{
    unsigned n = kh->queued;
    as_diag d = {{0}, {0}};
    as_err err = k8s_kept_post_flush(k, kh, true, &d);
    if (err)
        tally_lost(k, err, n, &d);
}

/* read_due reads the answers due on kh (the Events sent a tick before:
 * by now they have come) and counts each. An answer lost with the
 * connection counts as dropped, as do those behind it; one lost to the
 * client stopping is not counted (it was sent and may well be posted). */
static void read_due(k8s_client *k, k8s_kept *kh)
{
    while (kh->wire.pending) {
        unsigned due = kh->wire.pending;
        long status = 0;
        as_diag d = {{0}, {0}};
        as_err err = k8s_kept_post_recv(k, kh, NULL, &status, 0, &d);
        if (!err) {
            tally(k, AS_OK, status, NULL, &d);
            continue;
        }
        if (!k8s_stopping(k))
            tally_lost(k, err, due, &d);
        return;
    }
}

/* send_batch frames the n jobs into as few writes as kh's request buffer
 * allows and sends them, pipelined; their answers are read a tick later
 * (read_due). Where kh's requests need libcurl, each is posted and
 * answered in turn. */
static void send_batch(k8s_client *k, k8s_kept *kh, const k8s_event_job *jobs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const k8s_event_job *j = &jobs[i];
        as_diag d = {{0}, {0}};
        as_err err = frame(k, kh, j);
        if (!err)
            err = k8s_kept_post_add(k, kh, kh->path.data, kh->body.data, kh->body.len, &d);
        if (err == AS_ETOOBIG && kh->queued) {
            flush(k, kh); /* the buffer is full: what it holds goes first */
            err = k8s_kept_post_add(k, kh, kh->path.data, kh->body.data, kh->body.len, &d);
        }
        if (err == AS_EUNSUPPORTED) {
            post_one(k, kh, j);
            continue;
        }
        if (err)
            tally(k, err, 0, j, &d);
    }
    flush(k, kh);
}

/* The poster wakes this often while Events come; the Events of a tick go
 * out in one write, and their answers are read at the next tick, when
 * they have come, so that neither the poster nor the threads that queue
 * Events are woken once per Event. An Event waits a tick at most. */
#define EVENT_TICK_MS 50
/* The most Events taken in one tick (the rest wait for the next). */
#define EVENT_BATCH 64

static void *event_worker(void *arg)
{
    k8s_client *k = arg;
    pthread_setname_np(pthread_self(), "as-k8s-events");
    k8s_kept kh; /* one keep-alive connection for events, its options kept */
    bool have = k8s_kept_init(&kh, 64 * 1024) == AS_OK;
    k8s_event_job batch[EVENT_BATCH];
    pthread_mutex_lock(&k->emu);
    for (;;) {
        /* Idle: nothing queued, no answer due; a queued Event wakes it. */
        while (k->eq_len == 0 && !kh.wire.pending && !k8s_stopping(k)) {
            k->eidle = true;
            pthread_cond_wait(&k->econd, &k->emu);
            k->eidle = false;
        }
        if (k8s_stopping(k) || !have)
            break;
        size_t n = 0;
        while (n < EVENT_BATCH && k->eq_len > 0) {
            batch[n++] = k->eq[k->eq_head];
            k->eq_head = (k->eq_head + 1) % k->eq_cap;
            k->eq_len--;
        }
        pthread_mutex_unlock(&k->emu);
        read_due(k, &kh);
        send_batch(k, &kh, batch, n);
        for (size_t i = 0; i < n; i++)
            ejob_free(&batch[i]);
        pthread_mutex_lock(&k->emu);
        if (!k8s_stopping(k)) {
            struct timespec ts = clock_deadline_ms(EVENT_TICK_MS);
            pthread_cond_timedwait(&k->econd, &k->emu, &ts);
        }
    }
    pthread_mutex_unlock(&k->emu);
    k8s_kept_fini(&kh);
    return NULL;
}

/* admit applies the limits every Event passes (emu held): the client not
 * stopping, one per pod and reason per cfg.event_pod_interval_ms, the
 * queue's room when queued, then a token of --event-qps. True: admitted
 * (the pod's slot stamped); false: drop it. */
static bool admit(k8s_client *k, uint64_t key, int64_t now, bool queued)
{
    if (k8s_stopping(k) || !k->erate_key)
        return false;
    /* Per pod+reason limit in a fixed table: a collision only ever lets an
     * extra event through, and memory stays bounded. */
    size_t slot = (size_t)(key % k->erate_n);
    if (k->erate_key[slot] == key && now - k->erate_ms[slot] < k->cfg.event_pod_interval_ms)
        return false;
    if (queued && (!k->eq || k->eq_len >= k->eq_cap))
        return false;
    /* Every Event is a write the API server and etcd make as costly as a
     * binding; past the operator's --event-qps, drop rather than delay (a
     * late "Scheduled" says nothing a pod's nodeName does not). Taken last,
     * so that Events dropped for the reasons above cost no token. */
    if (!k8s_rl_take(&k->erl))
        return false;
    k->erate_key[slot] = key;
    k->erate_ms[slot] = now;
    return true;
}

/* job_fill copies the Event's strings into j; false when memory is short. */
static bool job_fill(k8s_event_job *j, const char *ns, const char *name, const char *uid,
                     const char *type, const char *reason, const char *message, int64_t now)
{
    j->ns = strdup(ns);
    j->name = strdup(name);
    j->uid = strdup(uid ? uid : "");
    j->type = strdup(type ? type : "Normal");
    j->reason = strdup(reason);
    /* the message's first EVENT_MSG_MAX - 1 bytes, as before */
    j->message = strndup(message ? message : "", EVENT_MSG_MAX - 1);
    j->at_ms = now;
    return j->ns && j->name && j->uid && j->type && j->reason && j->message;
}

/* See events.h. */
void k8s_event_post(k8s_client *k, const char *ns, const char *name, const char *uid,
                    const char *type, const char *reason, const char *message)
{
    if (!k || !ns || !name || !reason)
        return;
    int64_t now = clock_now_ms();
    uint64_t key = k8s_pod_key_hash(ns, name, uid, reason);
    k8s_event_job j = {0};
    bool queued = false;
    pthread_mutex_lock(&k->emu);
    /* copied only once admitted: a dropped Event allocates nothing */
    if (!admit(k, key, now, true) || !job_fill(&j, ns, name, uid, type, reason, message, now))
        goto unlock;
    if (!k->erunning) {
        if (pthread_create(&k->ethread, NULL, event_worker, k) != 0)
            goto unlock;
        k->erunning = true;
    }
    k->eq[(k->eq_head + k->eq_len) % k->eq_cap] = j;
    k->eq_len++;
    queued = true;
    /* a poster between ticks takes it at the next */
    if (k->eidle)
        pthread_cond_signal(&k->econd);
unlock:
    pthread_mutex_unlock(&k->emu);
    if (!queued) {
        ejob_free(&j);
        k8s_count(k, &k->st.events_dropped, 1);
    }
}

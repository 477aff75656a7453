/* events.c - v1 Events (Scheduled / FailedScheduling), rate-limited per pod,
 * posted asynchronously through the client's call loop (mux.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/clock.h"
#include "agentsched/base/hash.h"
#include "agentsched/base/log.h"
#include "agentsched/k8s/events.h"
#include "agentsched/k8s/mux.h"
#include "internal.h"

#define ERATE_SLOTS   8192
#define EVENT_MSG_MAX 1024
#define EVENT_BODY    (16 * 1024)
#define EVENT_RESP    (64 * 1024)
/* Events on the wire at once. They share the binds' connection, and the
 * API server takes an Event as long as a binding: a burst of pods sent
 * all its Events at once would queue the binds behind them (libcurl sends
 * streams in order). One at a time was what the single poster thread did. */
#define EVENT_INFLIGHT 2

/* One Event in flight: its call, body, path and the answer's buffer in
 * one allocation's worth of owners, freed by its completion. */
struct k8s_event_job {
    k8s_call call;
    k8s_client *k;
    buf body, path, resp;
    k8s_event_job *next; /* waiting for its turn */
};

static void ejob_free(k8s_event_job *j);

/* See events.h. */
as_err k8s_events_init(k8s_client *k)
{
    k->eq_cap = k->cfg.event_queue;
    k->erate_n = ERATE_SLOTS;
    k->erate_key = calloc(k->erate_n, sizeof *k->erate_key);
    k->erate_ms = calloc(k->erate_n, sizeof *k->erate_ms);
    if (!k->erate_key || !k->erate_ms)
        return AS_ENOMEM;
    return AS_OK;
}

/* See events.h. */
void k8s_events_shutdown(k8s_client *k)
{
    /* The call loop has failed every Event still in flight (k8s_mux_stop
     * runs first), handing no turn on while stopping: the Events still
     * waiting are dropped here. */
    pthread_mutex_lock(&k->emu);
    k8s_event_job *j = k->ewait_head;
    k->ewait_head = k->ewait_tail = NULL;
    pthread_mutex_unlock(&k->emu);
    while (j) {
        k8s_event_job *n = j->next;
        k8s_count(k, &k->st.events_dropped, 1);
        ejob_free(j);
        j = n;
    }
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

static as_err event_body(k8s_client *k, buf *b, const char *ns, const char *name, const char *uid,
                         const char *type, const char *reason, const char *message, int64_t at_ms)
{
    char ts[32];
    clock_rfc3339(at_ms * 1000, 0, ts, sizeof ts);
    buf_puts(b, "{\"apiVersion\":\"v1\",\"kind\":\"Event\",\"metadata\":{\"name\":");
    event_name(b, name, (uint64_t)at_ms * 1000000ull + (clock_mono_ns() % 1000000ull));
    buf_puts(b, ",\"namespace\":");
    buf_json_cstr(b, ns);
    buf_puts(b, "},\"involvedObject\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"namespace\":");
    buf_json_cstr(b, ns);
    buf_puts(b, ",\"name\":");
    buf_json_cstr(b, name);
    if (uid && *uid) {
        buf_puts(b, ",\"uid\":");
        buf_json_cstr(b, uid);
    }
    buf_puts(b, "},\"reason\":");
    buf_json_cstr(b, reason);
    buf_puts(b, ",\"message\":");
    size_t ml = strlen(message);
    buf_json_str(b, message, ml < EVENT_MSG_MAX ? ml : EVENT_MSG_MAX - 1);
    buf_puts(b, ",\"type\":");
    buf_json_cstr(b, type);
    buf_puts(b, ",\"source\":{\"component\":");
    buf_json_cstr(b, k->scheduler_name);
    buf_puts(b, "},\"firstTimestamp\":\"");
    buf_puts(b, ts);
    buf_puts(b, "\",\"lastTimestamp\":\"");
    buf_puts(b, ts);
    buf_puts(b, "\",\"count\":1}");
    return b->err;
}

static void ejob_free(k8s_event_job *j)
{
    buf_free(&j->body);
    buf_free(&j->path);
    buf_free(&j->resp);
    free(j);
}

/* The call loop's completion of an Event (or a failed submission's). */
static void event_done(k8s_call *c)
{
    k8s_event_job *j = c->arg;
    k8s_client *k = j->k;
    if (c->cc == CURLE_OK && (c->status == 200 || c->status == 201)) {
        k8s_count(k, &k->st.events_posted, 1);
    } else {
        k8s_count(k, &k->st.events_dropped, 1);
        log_debug("msg=\"event not posted\" path=%s status=%ld err=\"%s\"", c->path, c->status,
                  c->cc == CURLE_OK ? "" : curl_easy_strerror(c->cc));
    }
    ejob_free(j);
    /* Its turn passes to the oldest waiting Event. */
    pthread_mutex_lock(&k->emu);
    k->eq_len--;
    k8s_event_job *n = k8s_stopping(k) ? NULL : k->ewait_head;
    if (n) {
        k->ewait_head = n->next;
        if (!k->ewait_head)
            k->ewait_tail = NULL;
    } else {
        k->eflying--;
    }
    pthread_mutex_unlock(&k->emu);
    if (n)
        k8s_mux_submit(k->mux, &n->call);
}

/* See events.h. */
void k8s_event_post(k8s_client *k, const char *ns, const char *name, const char *uid,
                    const char *type, const char *reason, const char *message)
{
    if (!k || !ns || !name || !reason)
        return;
    int64_t now = clock_now_ms();
    /* The rate table lives in memory only, so the key needs no stable
     * value across processes; mixing between the parts keeps them in
     * order. */
    const uint64_t k1 = 0x9e3779b97f4a7c15ull;
    uint64_t key = hash_str(uid && *uid ? uid : name);
    key = hash_mix(key ^ hash_str(ns), k1);
    key = hash_mix(key ^ hash_str(reason), k1);
    if (!key)
        key = 1;
    k8s_event_job *j = NULL;
    bool queued = false;
    pthread_mutex_lock(&k->emu);
    if (k8s_stopping(k) || !k->erate_key)
        goto drop;
    /* Per pod+reason limit in a fixed table: a collision only ever lets an
     * extra event through, and memory stays bounded. */
    size_t slot = (size_t)(key % k->erate_n);
    if (k->erate_key[slot] == key && now - k->erate_ms[slot] < k->cfg.event_pod_interval_ms)
        goto drop;
    if (k->eq_len >= k->eq_cap) /* cfg.event_queue Events queued or sent already */
        goto drop;
    /* Every Event is a write the API server and etcd make as costly as a
     * binding; past the operator's --event-qps, drop rather than delay (a
     * late "Scheduled" says nothing a pod's nodeName does not). Taken last,
     * so that Events dropped for the reasons above cost no token. */
    if (!k8s_rl_take(&k->erl))
        goto drop;
    k->erate_key[slot] = key;
    k->erate_ms[slot] = now;
    k->eq_len++;
    queued = true;
drop:
    pthread_mutex_unlock(&k->emu);
    if (!queued) {
        k8s_count(k, &k->st.events_dropped, 1);
        return;
    }
    /* Built on the caller's thread, outside the lock; sent by the loop. */
    if (!(j = calloc(1, sizeof *j)))
        goto fail;
    j->k = k;
    buf_init(&j->body, EVENT_BODY);
    buf_init(&j->path, 1024);
    buf_init(&j->resp, EVENT_RESP);
    buf_puts(&j->path, "/api/v1/namespaces/");
    k8s_path_segment(&j->path, ns);
    buf_puts(&j->path, "/events");
    if (j->path.err || event_body(k, &j->body, ns, name, uid ? uid : "", type ? type : "Normal",
                                  reason, message ? message : "", now))
        goto fail;
    j->call = (k8s_call){.method = "POST",
                         .path = j->path.data,
                         .body = j->body.data,
                         .body_len = j->body.len,
                         .resp = &j->resp,
                         .limited = true,
                         .done = event_done,
                         .arg = j};
    pthread_mutex_lock(&k->emu);
    bool send = k->eflying < EVENT_INFLIGHT;
    if (send) {
        k->eflying++;
    } else {
        if (k->ewait_tail)
            k->ewait_tail->next = j;
        else
            k->ewait_head = j;
        k->ewait_tail = j;
    }
    pthread_mutex_unlock(&k->emu);
    if (send)
        k8s_mux_submit(k->mux, &j->call);
    return;
fail:
    if (j)
        ejob_free(j);
    pthread_mutex_lock(&k->emu);
    k->eq_len--;
    pthread_mutex_unlock(&k->emu);
    k8s_count(k, &k->st.events_dropped, 1);
}

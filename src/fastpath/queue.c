/*
 * queue.c - activeQ (heap), backoffQ (heap by expiry), unschedulable pool
 * (list in arrival order), a uid index over all of them and the in-flight
 * pods, under one mutex.
 */
#include "agentsched/fastpath/queue.h"
#include "agentsched/base/clock.h"
#include "agentsched/base/hash.h"
#include "agentsched/base/sync.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct queue_entry {
    struct queue_entry *hnext;       /* uid hash chain */
    struct queue_entry *prev, *next; /* unschedulable pool list */
    char *uid;                       /* owned */
    uint64_t h;
    model_pod *pod;    /* owned */
    model_pod *update; /* owned: newer object received while in flight */
    queue_where where;
    size_t hidx; /* index in the active or backoff heap */
    int urgent;
    uint64_t seq; /* arrival in activeQ */
    unsigned attempts;
    int64_t failed_ms;            /* last failure */
    int64_t backoff_until;        /* failed_ms + backoff(attempts) */
    int64_t pool_since;           /* entered the unschedulable pool */
    int64_t active_since;         /* entered activeQ (queue wait) */
    uint64_t added_ns, active_ns; /* real monotonic, for latency metrics */
    uint64_t move_seq_at_pop;
    bool moved_in_flight; /* a relevant update arrived while in flight */
    bool gone;            /* removed while in flight */
    uint64_t seen_epoch;
} queue_entry;

/* A heap slot keeps its entry's order key next to the pointer, so a sift
 * compares within the array instead of chasing entry and pod pointers
 * (the pop of a 2k-deep activeQ was 12% of a fast-path worker's time). An
 * entry's key never changes while it is in a heap: a priority change goes
 * out and back in (queue_add), and backoff_until changes only before
 * to_backoff or right before move_back takes the entry out. */
typedef struct hslot {
    uint64_t k1, k2; /* ascending: k1, then k2 */
    queue_entry *e;
} hslot;

typedef struct heap {
    hslot *a;
    size_t n, cap;
} heap;

struct queue {
    queue_config cfg;
    pthread_mutex_t mu;
    pthread_cond_t cond; /* CLOCK_MONOTONIC */
    bool shutdown;
    bool held; /* queue_hold: pops hand out nothing */
    queue_entry **buckets;
    size_t nbuckets; /* power of two */
    size_t total;
    heap active, backoff;
    queue_entry *pool_head, *pool_tail;
    size_t npool, ninflight;
    uint64_t seq, move_seq, epoch;
    queue_stats st; /* counters only; depths filled on read */
};

static int64_t mono_ms(void *arg)
{
    (void)arg;
    return clock_mono_ms();
}

static int64_t q_now(const queue *q)
{
    return q->cfg.clock(q->cfg.clock_arg);
}

/* See queue.h. */
void queue_config_defaults(queue_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->backoff_initial_ms = 1000;
    cfg->backoff_max_ms = 10000;
    cfg->unsched_max_ms = 300000;
    cfg->max_pods = 100000;
    cfg->clock = mono_ms;
}

/* See queue.h. */
const char *queue_where_name(queue_where w)
{
    static const char *const names[] = {"absent", "active", "backoff", "unschedulable", "inflight"};
    return (unsigned)w < sizeof names / sizeof names[0] ? names[w] : "?";
}

/* ---- heaps ----------------------------------------------------------- */

/* Active order: urgent first, then priority, then arrival. */
static hslot active_key(queue_entry *e)
{
    /* urgent >= 0 and priority int32: both fit 32 bits once flipped to
     * ascending. */
    uint64_t u = (uint64_t)((int64_t)INT32_MAX - (int64_t)e->urgent);
    uint64_t p = (uint64_t)((int64_t)INT32_MAX - (int64_t)e->pod->priority);
    return (hslot){(u << 32) | (p & 0xffffffffu), e->seq, e};
}

/* Backoff order: due time, then arrival. */
static hslot backoff_key(queue_entry *e)
{
    return (hslot){(uint64_t)e->backoff_until ^ (1ull << 63), e->seq, e};
}

typedef hslot (*key_fn)(queue_entry *);

static inline bool slot_before(const hslot *a, const hslot *b)
{
    return a->k1 < b->k1 || (a->k1 == b->k1 && a->k2 < b->k2);
}

static inline void heap_set(heap *h, size_t i, hslot s)
{
    h->a[i] = s;
    s.e->hidx = i;
}

static void heap_up(heap *h, size_t i)
{
    hslot s = h->a[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!slot_before(&s, &h->a[p]))
            break;
        heap_set(h, i, h->a[p]);
        i = p;
    }
    heap_set(h, i, s);
}

static void heap_down(heap *h, size_t i)
{
    hslot s = h->a[i];
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const hslot *best = &s;
        if (l < h->n && slot_before(&h->a[l], best)) {
            m = l;
            best = &h->a[l];
        }
        if (r < h->n && slot_before(&h->a[r], best))
            m = r;
        if (m == i)
            break;
        heap_set(h, i, h->a[m]);
        i = m;
    }
    heap_set(h, i, s);
}

static as_err heap_push(heap *h, queue_entry *e, key_fn key)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        hslot *a = realloc(h->a, cap * sizeof *a);
        if (!a)
            return AS_ENOMEM;
        h->a = a;
        h->cap = cap;
    }
    heap_set(h, h->n++, key(e));
    heap_up(h, h->n - 1);
    return AS_OK;
}

static void heap_remove(heap *h, queue_entry *e)
{
    size_t i = e->hidx;
    assert(i < h->n && h->a[i].e == e);
    h->n--;
    if (i == h->n)
        return;
    heap_set(h, i, h->a[h->n]);
    heap_down(h, i);
    heap_up(h, h->a[i].e->hidx);
}

/* The entry at the top of a non-empty heap. */
static inline queue_entry *heap_top(const heap *h)
{
    return h->a[0].e;
}

/* ---- index ----------------------------------------------------------- */

static queue_entry *index_find(const queue *q, const char *uid, uint64_t h)
{
    for (queue_entry *e = q->buckets[h & (q->nbuckets - 1)]; e; e = e->hnext)
        if (e->h == h && strcmp(e->uid, uid) == 0)
            return e;
    return NULL;
}

static void index_grow(queue *q)
{
    size_t nb = q->nbuckets * 2;
    queue_entry **b = calloc(nb, sizeof *b);
    if (!b)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < q->nbuckets; i++) {
        queue_entry *e = q->buckets[i];
        while (e) {
            queue_entry *next = e->hnext;
            e->hnext = b[e->h & (nb - 1)];
            b[e->h & (nb - 1)] = e;
            e = next;
        }
    }
    free(q->buckets);
    q->buckets = b;
    q->nbuckets = nb;
}

static void index_unlink(queue *q, queue_entry *e)
{
    queue_entry **pp = &q->buckets[e->h & (q->nbuckets - 1)];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    q->total--;
}

static void entry_free(queue_entry *e)
{
    model_pod_free(e->pod);
    model_pod_free(e->update);
    free(e->uid);
    free(e);
}

/* ---- placement in the sub-queues (q->mu held) ------------------------ */

static void pool_unlink(queue *q, queue_entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        q->pool_head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        q->pool_tail = e->prev;
    e->prev = e->next = NULL;
    q->npool--;
}

/* Takes e out of whatever sub-queue holds it (not the index). */
static void detach(queue *q, queue_entry *e)
{
    switch (e->where) {
    case QUEUE_ACTIVE:
        heap_remove(&q->active, e);
        break;
    case QUEUE_BACKOFF:
        heap_remove(&q->backoff, e);
        break;
    case QUEUE_UNSCHED:
        pool_unlink(q, e);
        break;
    case QUEUE_INFLIGHT:
        q->ninflight--;
        break;
    case QUEUE_ABSENT:
        break;
    }
    e->where = QUEUE_ABSENT;
}

/* The heaps grow by doubling; on the rare allocation failure the pod is
 * dropped (logged by the caller's counters) rather than lost silently in
 * a half-linked state. */
static void drop(queue *q, queue_entry *e)
{
    detach(q, e);
    index_unlink(q, e);
    entry_free(e);
}

static void to_active(queue *q, queue_entry *e, int urgent, int64_t now)
{
    e->urgent = urgent;
    e->seq = ++q->seq;
    e->active_since = now;
    e->active_ns = clock_mono_ns();
    if (heap_push(&q->active, e, active_key) != AS_OK) {
        e->where = QUEUE_ABSENT;
        index_unlink(q, e);
        entry_free(e);
        return;
    }
    e->where = QUEUE_ACTIVE;
    pthread_cond_signal(&q->cond);
}

static void to_backoff(queue *q, queue_entry *e)
{
    e->seq = ++q->seq;
    if (heap_push(&q->backoff, e, backoff_key) != AS_OK) {
        e->where = QUEUE_ABSENT;
        index_unlink(q, e);
        entry_free(e);
        return;
    }
    e->where = QUEUE_BACKOFF;
}

static void to_pool(queue *q, queue_entry *e, int64_t now)
{
    e->pool_since = now;
    e->prev = q->pool_tail;
    e->next = NULL;
    if (q->pool_tail)
        q->pool_tail->next = e;
    else
        q->pool_head = e;
    q->pool_tail = e;
    q->npool++;
    e->where = QUEUE_UNSCHED;
}

/* Back from the pool (or a relevant update): activeQ unless its backoff
 * is still running. */
static void move_back(queue *q, queue_entry *e, int64_t now)
{
    detach(q, e);
    if (e->backoff_until > now)
        to_backoff(q, e);
    else
        to_active(q, e, 0, now);
}

/* Moves due backoffs to activeQ and flushes pods older than the pool
 * bound. */
static void apply_due(queue *q, int64_t now)
{
    while (q->backoff.n && heap_top(&q->backoff)->backoff_until <= now) {
        queue_entry *e = heap_top(&q->backoff);
        detach(q, e);
        to_active(q, e, 0, now);
    }
    while (q->pool_head && now - q->pool_head->pool_since >= q->cfg.unsched_max_ms) {
        q->st.flushed++;
        move_back(q, q->pool_head, now);
    }
}

/* Earliest time apply_due has something to do; INT64_MAX when nothing. */
static int64_t next_due(const queue *q)
{
    int64_t t = INT64_MAX;
    if (q->backoff.n)
        t = heap_top(&q->backoff)->backoff_until;
    if (q->pool_head && q->pool_head->pool_since + q->cfg.unsched_max_ms < t)
        t = q->pool_head->pool_since + q->cfg.unsched_max_ms;
    return t;
}

/* ---- public ------------------------------------------------------------ */

/* See queue.h. */
as_err queue_new(const queue_config *cfg, queue **out)
{
    *out = NULL;
    queue *q = calloc(1, sizeof *q);
    if (!q)
        return AS_ENOMEM;
    queue_config_defaults(&q->cfg);
    if (cfg) {
        if (cfg->backoff_initial_ms > 0)
            q->cfg.backoff_initial_ms = cfg->backoff_initial_ms;
        if (cfg->backoff_max_ms > 0)
            q->cfg.backoff_max_ms = cfg->backoff_max_ms;
        if (cfg->unsched_max_ms > 0)
            q->cfg.unsched_max_ms = cfg->unsched_max_ms;
        if (cfg->max_pods)
            q->cfg.max_pods = cfg->max_pods;
        if (cfg->clock) {
            q->cfg.clock = cfg->clock;
            q->cfg.clock_arg = cfg->clock_arg;
        }
    }
    if (q->cfg.backoff_max_ms < q->cfg.backoff_initial_ms)
        q->cfg.backoff_max_ms = q->cfg.backoff_initial_ms;
    q->nbuckets = 256;
    q->buckets = calloc(q->nbuckets, sizeof *q->buckets);
    if (!q->buckets) {
        free(q);
        return AS_ENOMEM;
    }
    sync_mutex_init_hot(&q->mu);
    clock_cond_init(&q->cond);
    *out = q;
    return AS_OK;
}

/* See queue.h. */
void queue_free(queue *q)
{
    if (!q)
        return;
    for (size_t i = 0; i < q->nbuckets; i++) {
        queue_entry *e = q->buckets[i];
        while (e) {
            queue_entry *next = e->hnext;
            entry_free(e);
            e = next;
        }
    }
    free(q->buckets);
    free(q->active.a);
    free(q->backoff.a);
    pthread_cond_destroy(&q->cond);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

/* See queue.h. */
int64_t queue_backoff_ms(const queue *q, unsigned attempts)
{
    if (!attempts)
        return 0;
    int64_t d = q->cfg.backoff_initial_ms;
    for (unsigned i = 1; i < attempts && d < q->cfg.backoff_max_ms; i++)
        d *= 2;
    return d < q->cfg.backoff_max_ms ? d : q->cfg.backoff_max_ms;
}

static bool labels_eq(const model_labels *a, const model_labels *b)
{
    if (a->n != b->n)
        return false;
    for (uint32_t i = 0; i < a->n; i++)
        if (strcmp(a->items[i].key, b->items[i].key) ||
            strcmp(a->items[i].value, b->items[i].value))
            return false;
    return true;
}

static bool str_eq(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool reqs_eq(const model_selector_req *a, uint32_t na, const model_selector_req *b,
                    uint32_t nb)
{
    if (na != nb)
        return false;
    for (uint32_t i = 0; i < na; i++) {
        if (a[i].op != b[i].op || a[i].nvalues != b[i].nvalues || !str_eq(a[i].key, b[i].key))
            return false;
        for (uint32_t j = 0; j < a[i].nvalues; j++)
            if (!str_eq(a[i].values[j], b[i].values[j]))
                return false;
    }
    return true;
}

/* Does anything scheduling reads differ between two versions of a pod? */
static bool sched_relevant_change(const model_pod *a, const model_pod *b)
{
    if (memcmp(&a->req, &b->req, sizeof a->req) || a->gpu_count != b->gpu_count ||
        a->gpu_milli != b->gpu_milli || a->priority != b->priority ||
        !str_eq(a->unknown_res, b->unknown_res) || !labels_eq(&a->node_selector, &b->node_selector))
        return true;
    if (a->affinity.present != b->affinity.present || a->affinity.nterms != b->affinity.nterms)
        return true;
    for (uint32_t i = 0; i < a->affinity.nterms; i++) {
        const model_selector_term *x = &a->affinity.terms[i], *y = &b->affinity.terms[i];
        if (!reqs_eq(x->exprs, x->nexprs, y->exprs, y->nexprs) ||
            !reqs_eq(x->fields, x->nfields, y->fields, y->nfields))
            return true;
    }
    if (a->ntolerations != b->ntolerations)
        return true;
    for (uint32_t i = 0; i < a->ntolerations; i++) {
        const model_toleration *x = &a->tolerations[i], *y = &b->tolerations[i];
        if (x->op != y->op || x->effect != y->effect || !str_eq(x->key, y->key) ||
            !str_eq(x->value, y->value))
            return true;
    }
    return false;
}

/* hand_out makes e (in no heap or list) in flight and fills *out. */
static void hand_out(queue *q, queue_entry *e, int64_t now, queue_item *out)
{
    e->where = QUEUE_INFLIGHT;
    q->ninflight++;
    e->move_seq_at_pop = q->move_seq;
    e->moved_in_flight = false;
    out->e = e;
    out->pod = e->pod;
    out->attempts = e->attempts;
    out->urgent = e->urgent != 0;
    out->queued_ms = now - e->active_since;
    out->added_ns = e->added_ns;
    out->active_ns = e->active_ns;
    e->urgent = 0;
}

/* add is queue_add; with out non-NULL, a new pod that finds activeQ
 * empty is handed out at once (out->e set) instead of waking a popper. */
static as_err add(queue *q, model_pod *pod, queue_item *out)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!pod)
        return AS_EINVAL;
    /* key may point into pod, which stays alive until the entry is found
     * or made. */
    char tmp[600];
    size_t klen;
    const char *key = model_pod_key(pod, tmp, sizeof tmp, &klen);
    uint64_t h = hash_bytes(key, klen);
    as_err err = AS_OK;
    pthread_mutex_lock(&q->mu);
    int64_t now = q_now(q);
    queue_entry *e = index_find(q, key, h);
    if (e) {
        e->seen_epoch = q->epoch;
        q->st.updated++;
        if (e->where == QUEUE_INFLIGHT) {
            const model_pod *cur = e->update ? e->update : e->pod;
            if (sched_relevant_change(cur, pod))
                e->moved_in_flight = true;
            model_pod_free(e->update);
            e->update = pod;
            pod = NULL;
            goto done;
        }
        bool relevant = sched_relevant_change(e->pod, pod);
        bool prio = e->pod->priority != pod->priority;
        if (e->where == QUEUE_ACTIVE && prio) {
            /* keep the heap order valid for the new priority */
            detach(q, e);
            model_pod_free(e->pod);
            e->pod = pod;
            pod = NULL;
            to_active(q, e, e->urgent, e->active_since);
            goto done;
        }
        model_pod_free(e->pod);
        e->pod = pod;
        pod = NULL;
        if (relevant && (e->where == QUEUE_UNSCHED || e->where == QUEUE_BACKOFF)) {
            /* the pod itself changed: it may fit now, without waiting */
            e->backoff_until = 0;
            move_back(q, e, now);
        }
        goto done;
    }
    if (q->total >= q->cfg.max_pods) {
        q->st.rejected_full++;
        err = AS_ELIMIT;
        goto done;
    }
    e = calloc(1, sizeof *e);
    if (!e || !(e->uid = strdup(key))) {
        free(e);
        err = AS_ENOMEM;
        goto done;
    }
    e->h = h;
    e->added_ns = clock_mono_ns();
    e->pod = pod;
    pod = NULL;
    e->seen_epoch = q->epoch;
    e->hnext = q->buckets[h & (q->nbuckets - 1)];
    q->buckets[h & (q->nbuckets - 1)] = e;
    q->total++;
    q->st.added++;
    if (out && !q->active.n && !q->held && !q->shutdown) {
        e->seq = ++q->seq;
        e->active_since = now;
        e->active_ns = e->added_ns;
        hand_out(q, e, now, out);
    } else {
        to_active(q, e, 0, now);
    }
    if (q->total > q->nbuckets)
        index_grow(q);
done:
    pthread_mutex_unlock(&q->mu);
    model_pod_free(pod);
    return err;
}

/* See queue.h. */
as_err queue_add(queue *q, model_pod *pod)
{
    return add(q, pod, NULL);
}

/* See queue.h. */
as_err queue_add_take(queue *q, model_pod *pod, queue_item *out)
{
    return add(q, pod, out);
}

/* q->mu held. */
static bool remove_locked(queue *q, queue_entry *e)
{
    q->st.removed++;
    if (e->where == QUEUE_INFLIGHT) {
        e->gone = true;
        return true;
    }
    drop(q, e);
    return true;
}

/* See queue.h. */
bool queue_remove(queue *q, const char *uid)
{
    if (!uid)
        return false;
    uint64_t h = hash_str(uid);
    pthread_mutex_lock(&q->mu);
    queue_entry *e = index_find(q, uid, h);
    bool found = e && remove_locked(q, e);
    pthread_mutex_unlock(&q->mu);
    return found;
}

/* See queue.h. */
as_err queue_pop(queue *q, int64_t timeout_ms, queue_item *out)
{
    memset(out, 0, sizeof *out);
    int64_t real_start = clock_mono_ms();
    as_err err = AS_OK;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        if (q->shutdown) {
            err = AS_EGONE;
            break;
        }
        int64_t now = q_now(q);
        apply_due(q, now);
        if (q->active.n && !q->held) {
            queue_entry *e = heap_top(&q->active);
            detach(q, e);
            hand_out(q, e, now, out);
            break;
        }
        if (timeout_ms == 0) {
            err = AS_ETIMEOUT;
            break;
        }
        /* Sleep until the next due transition, the caller's deadline or a
         * wake-up, whichever is first (at most a second, so an injected
         * clock that jumps is noticed). */
        int64_t real_now = clock_mono_ms();
        int64_t wait = 1000;
        int64_t due = next_due(q);
        if (due != INT64_MAX && due - now < wait)
            wait = due - now < 1 ? 1 : due - now;
        if (timeout_ms > 0) {
            int64_t left = real_start + timeout_ms - real_now;
            if (left <= 0) {
                err = AS_ETIMEOUT;
                break;
            }
            if (left < wait)
                wait = left;
        }
        struct timespec ts = clock_deadline_ms(wait);
        pthread_cond_timedwait(&q->cond, &q->mu, &ts);
    }
    pthread_mutex_unlock(&q->mu);
    return err;
}

/* Common start of the settle calls: true when the entry goes on living
 * (not gone); swaps in a pending update. */
static bool settle_begin(queue *q, queue_entry *e)
{
    assert(e->where == QUEUE_INFLIGHT);
    if (e->gone) {
        drop(q, e);
        return false;
    }
    detach(q, e);
    if (e->update) {
        model_pod_free(e->pod);
        e->pod = e->update;
        e->update = NULL;
    }
    return true;
}

/* See queue.h. */
void queue_done(queue *q, queue_entry *e)
{
    pthread_mutex_lock(&q->mu);
    assert(e->where == QUEUE_INFLIGHT);
    drop(q, e);
    pthread_mutex_unlock(&q->mu);
}

static void fail(queue *q, queue_entry *e, int64_t now)
{
    e->attempts++;
    e->failed_ms = now;
    e->backoff_until = now + queue_backoff_ms(q, e->attempts);
}

/* See queue.h. */
void queue_unschedulable(queue *q, queue_entry *e)
{
    pthread_mutex_lock(&q->mu);
    int64_t now = q_now(q);
    bool moved = e->move_seq_at_pop != q->move_seq || e->moved_in_flight;
    if (settle_begin(q, e)) {
        fail(q, e, now);
        if (moved)
            to_backoff(q, e);
        else
            to_pool(q, e, now);
    }
    pthread_mutex_unlock(&q->mu);
}

/* See queue.h. */
void queue_backoff(queue *q, queue_entry *e)
{
    pthread_mutex_lock(&q->mu);
    int64_t now = q_now(q);
    if (settle_begin(q, e)) {
        fail(q, e, now);
        to_backoff(q, e);
    }
    pthread_mutex_unlock(&q->mu);
}

/* See queue.h. */
void queue_urgent(queue *q, queue_entry *e)
{
    pthread_mutex_lock(&q->mu);
    int64_t now = q_now(q);
    if (settle_begin(q, e)) {
        q->st.urgent++;
        to_active(q, e, 1, now);
    }
    pthread_mutex_unlock(&q->mu);
}

/* See queue.h. */
size_t queue_move_all(queue *q)
{
    pthread_mutex_lock(&q->mu);
    int64_t now = q_now(q);
    q->move_seq++;
    size_t n = 0;
    while (q->pool_head) {
        move_back(q, q->pool_head, now);
        n++;
    }
    q->st.moved += n;
    if (n)
        pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->mu);
    return n;
}

/* See queue.h. */
void queue_sync_begin(queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->epoch++;
    pthread_mutex_unlock(&q->mu);
}

/* See queue.h. */
size_t queue_sync_end(queue *q)
{
    size_t n = 0;
    pthread_mutex_lock(&q->mu);
    for (size_t i = 0; i < q->nbuckets; i++) {
        queue_entry *e = q->buckets[i];
        while (e) {
            queue_entry *next = e->hnext;
            if (e->seen_epoch < q->epoch && !e->gone) {
                remove_locked(q, e);
                n++;
            }
            e = next;
        }
    }
    pthread_mutex_unlock(&q->mu);
    return n;
}

/* See queue.h. */
queue_where queue_where_is(queue *q, const char *uid, unsigned *attempts)
{
    queue_where w = QUEUE_ABSENT;
    uint64_t h = hash_str(uid);
    pthread_mutex_lock(&q->mu);
    queue_entry *e = index_find(q, uid, h);
    if (e && !e->gone) {
        w = e->where;
        if (attempts)
            *attempts = e->attempts;
    }
    pthread_mutex_unlock(&q->mu);
    return w;
}

/* See queue.h. */
void queue_shutdown(queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->shutdown = true;
    pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->mu);
}

/* See queue.h. */
void queue_hold(queue *q, bool hold)
{
    pthread_mutex_lock(&q->mu);
    q->held = hold;
    if (!hold)
        pthread_cond_broadcast(&q->cond);
    pthread_mutex_unlock(&q->mu);
}

/* See queue.h. */
bool queue_held(queue *q)
{
    pthread_mutex_lock(&q->mu);
    bool h = q->held;
    pthread_mutex_unlock(&q->mu);
    return h;
}

/* See queue.h. */
void queue_get_stats(queue *q, queue_stats *out)
{
    pthread_mutex_lock(&q->mu);
    size_t before = q->active.n;
    apply_due(q, q_now(q));
    if (q->active.n > before)
        pthread_cond_broadcast(&q->cond);
    *out = q->st;
    out->active = q->active.n;
    out->backoff = q->backoff.n;
    out->unsched = q->npool;
    out->inflight = q->ninflight;
    out->total = q->total;
    out->full = q->total >= q->cfg.max_pods;
    pthread_mutex_unlock(&q->mu);
}

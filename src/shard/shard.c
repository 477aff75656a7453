/*
 * shard.c - NodeShard coordination inside `agentsched serve` (see shard.h
 * for the protocol and the revision gating).
 */
#include "agentsched/shard/shard.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agentsched/base/clock.h"
#include "agentsched/base/log.h"
#include "agentsched/base/table.h"
#include "agentsched/k8s/shard_status.h"

/* A set of borrowed strings is a base table whose values are the keys. */
typedef table sset;

static bool sset_has(const sset *s, const char *k)
{
    return table_get(s, k, strlen(k)) != NULL;
}

/* Adds k (borrowed); *added says whether it was new. */
static as_err sset_add(sset *s, const char *k, bool *added)
{
    if (added)
        *added = false;
    size_t len = strlen(k);
    if (table_get(s, k, len))
        return AS_OK;
    as_err err = table_put(s, k, len, (void *)k);
    if (!err && added)
        *added = true;
    return err;
}

static void sset_free(sset *s)
{
    table_free(s);
}

/* ------------------------------------------------------------------ */
/* Name sets and the view                                              */
/* ------------------------------------------------------------------ */

/* See shard.h. */
void shard_names_free(shard_names *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

/* See shard.h. */
void shard_view_free(shard_view *v)
{
    if (!v)
        return;
    shard_names_free(&v->desired);
    shard_names_free(&v->usable);
    shard_names_free(&v->to_add);
    shard_names_free(&v->to_remove);
    free(v->resource_version);
    memset(v, 0, sizeof *v);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends a copy of name; the caller sorts at the end. */
static as_err names_push(shard_names *s, size_t *cap, const char *name)
{
    if (s->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        char **v = realloc(s->v, nc * sizeof *v);
        if (!v)
            return AS_ENOMEM;
        s->v = v;
        *cap = nc;
    }
    if (!(s->v[s->n] = strdup(name)))
        return AS_ENOMEM;
    s->n++;
    return AS_OK;
}

static void names_sort(shard_names *s)
{
    if (s->n > 1)
        qsort(s->v, s->n, sizeof *s->v, cmp_str);
}

/* Does the list v[0..n) (any order, duplicates allowed) hold exactly the
 * names of the sorted set want? */
static bool same_set(char *const *v, size_t n, const shard_names *want)
{
    size_t hits = 0;
    for (size_t i = 0; i < n; i++) {
        if (!v[i] || !bsearch(&v[i], want->v, want->n, sizeof *want->v, cmp_str))
            return false;
        hits++;
    }
    /* Every entry is in want; equal when want has no name the list lacks
     * (counting distinct entries of v). */
    if (hits < want->n)
        return false;
    sset seen = {0};
    size_t distinct = 0;
    for (size_t i = 0; i < n; i++) {
        bool added = false;
        if (sset_add(&seen, v[i], &added)) {
            sset_free(&seen);
            return false;
        }
        distinct += added;
    }
    sset_free(&seen);
    return distinct == want->n;
}

/* See shard.h. */
as_err shard_compute(const k8s_shard *shards, size_t n, const char *own, shard_view *out)
{
    memset(out, 0, sizeof *out);
    as_err err = AS_OK;
    sset others = {0}, desired = {0};
    size_t cap_d = 0, cap_u = 0, cap_a = 0, cap_r = 0;
    const k8s_shard *me = NULL;
    for (size_t i = 0; i < n; i++) {
        const k8s_shard *s = &shards[i];
        if (s->name && own && strcmp(s->name, own) == 0) {
            me = s;
            continue;
        }
        for (size_t j = 0; j < s->n_in_use; j++)
            if (s->nodes_in_use[j] && (err = sset_add(&others, s->nodes_in_use[j], NULL)))
                goto done;
    }
    if (!me)
        goto done;
    out->own_present = true;
    if (me->resource_version && !(out->resource_version = strdup(me->resource_version))) {
        err = AS_ENOMEM;
        goto done;
    }
    for (size_t j = 0; j < me->n_desired; j++) {
        const char *nm = me->nodes_desired[j];
        bool added;
        if (!nm || !*nm || (err = sset_add(&desired, nm, &added)))
            goto check;
        if (!added)
            continue;
        if ((err = names_push(&out->desired, &cap_d, nm)))
            goto done;
        if (sset_has(&others, nm))
            err = names_push(&out->to_add, &cap_a, nm);
        else
            err = names_push(&out->usable, &cap_u, nm);
    check:
        if (err)
            goto done;
    }
    sset seen = {0};
    size_t in_use_usable = 0; /* distinct own nodesInUse that are usable */
    for (size_t j = 0; j < me->n_in_use; j++) {
        const char *nm = me->nodes_in_use[j];
        bool added;
        if (!nm || (err = sset_add(&seen, nm, &added)))
            break;
        if (!added)
            continue;
        if (sset_has(&desired, nm)) {
            if (!sset_has(&others, nm))
                in_use_usable++;
            else
                in_use_usable = SIZE_MAX / 2; /* uses a node another shard holds */
            continue;
        }
        if ((err = names_push(&out->to_remove, &cap_r, nm)))
            break;
    }
    sset_free(&seen);
    if (!err) {
        names_sort(&out->to_add);
        names_sort(&out->to_remove);
        out->status_current = out->to_remove.n == 0 && in_use_usable == out->usable.n &&
                              same_set(me->nodes_to_add, me->n_to_add, &out->to_add) &&
                              same_set(me->nodes_to_remove, me->n_to_remove, &out->to_remove);
    }
done:
    sset_free(&others);
    sset_free(&desired);
    if (err) {
        shard_view_free(out);
        return err;
    }
    names_sort(&out->desired);
    names_sort(&out->usable);
    names_sort(&out->to_add);
    names_sort(&out->to_remove);
    return AS_OK;
}

/* ------------------------------------------------------------------ */
/* Coordinator                                                         */
/* ------------------------------------------------------------------ */

/* Decisions in flight per revision, ascending (revisions only grow, and a
 * decision registers the current one, so appends keep the order). */
typedef struct rev_count {
    uint64_t rev;
    size_t count;
} rev_count;

#define REV_SLOTS 256

struct shard_coord {
    shard_coord_config cfg;
    char *name;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    rev_count inflight[REV_SLOTS];
    size_t ninflight;
    bool have_applied;
    shard_names applied; /* usable set last applied to the cache */
    shard_view pending;  /* status waiting for the gate (valid when pending_rev) */
    uint64_t pending_rev;
    bool publishing; /* one publish at a time */
    int64_t retry_at_ms;
    shard_coord_stats st;
    bool thread_started, stop;
    pthread_t thread;
    bool logged_absent;
    bool have_last; /* last_desired holds our shard's last nodesDesired */
    shard_names last_desired;
    char foreign_seen[40]; /* status time of the last foreign-status warning */
};

/* See shard.h. */
as_err shard_coord_new(const shard_coord_config *cfg, shard_coord **out, as_diag *diag)
{
    *out = NULL;
    if (!cfg || !cfg->cache)
        return as_diag_set(diag, AS_EINVAL, NULL, "shard coordinator: no cache");
    if (!cfg->name || !*cfg->name)
        return as_diag_set(diag, AS_EINVAL, "shard-name",
                           "--shard-name is empty: give the NodeShard name (default agentsched)");
    shard_coord *c = calloc(1, sizeof *c);
    if (!c || !(c->name = strdup(cfg->name))) {
        free(c);
        return AS_ENOMEM;
    }
    c->cfg = *cfg;
    c->cfg.name = c->name;
    if (c->cfg.retry_ms <= 0)
        c->cfg.retry_ms = 2000;
    pthread_mutex_init(&c->mu, NULL);
    clock_cond_init(&c->cond);
    cache_set_shard_mode(cfg->cache, cfg->mode);
    *out = c;
    return AS_OK;
}

/* Under mu: is the pending status publishable now? */
static bool gate_open(const shard_coord *c)
{
    return c->pending_rev && !c->publishing &&
           (c->ninflight == 0 || c->inflight[0].rev >= c->pending_rev);
}

/* See shard.h. */
uint64_t shard_decision_begin(shard_coord *c)
{
    if (!c)
        return 0;
    pthread_mutex_lock(&c->mu);
    uint64_t rev = cache_shard_revision(c->cfg.cache);
    if (c->ninflight && c->inflight[c->ninflight - 1].rev == rev) {
        c->inflight[c->ninflight - 1].count++;
    } else if (c->ninflight < REV_SLOTS) {
        c->inflight[c->ninflight++] = (rev_count){rev, 1};
    } else {
        /* Table full: count it under the newest older revision. That only
         * delays a publish (conservative); _end finds it there. */
        c->inflight[c->ninflight - 1].count++;
        rev = c->inflight[c->ninflight - 1].rev;
    }
    pthread_mutex_unlock(&c->mu);
    return rev;
}

/* See shard.h. */
void shard_decision_end(shard_coord *c, uint64_t revision)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    size_t i = 0;
    while (i < c->ninflight && c->inflight[i].rev != revision)
        i++;
    if (i == c->ninflight) {
        /* Unbalanced end: a caller bug, but never worth crashing the
         * scheduler over; say so loudly. */
        pthread_mutex_unlock(&c->mu);
        log_error("msg=\"shard_decision_end without begin\" revision=%llu",
                  (unsigned long long)revision);
        return;
    }
    if (--c->inflight[i].count == 0) {
        memmove(&c->inflight[i], &c->inflight[i + 1],
                (c->ninflight - i - 1) * sizeof c->inflight[0]);
        c->ninflight--;
        if (i == 0 && gate_open(c))
            pthread_cond_broadcast(&c->cond);
    }
    pthread_mutex_unlock(&c->mu);
}

/* See shard.h. */
size_t shard_coord_inflight(shard_coord *c, uint64_t revision)
{
    size_t n = 0;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->ninflight && c->inflight[i].rev < revision; i++)
        n += c->inflight[i].count;
    pthread_mutex_unlock(&c->mu);
    return n;
}

static bool names_equal(const shard_names *a, const shard_names *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->v[i], b->v[i]) != 0)
            return false;
    return true;
}

static as_err names_copy(const shard_names *src, shard_names *dst)
{
    memset(dst, 0, sizeof *dst);
    if (!src->n)
        return AS_OK;
    if (!(dst->v = calloc(src->n, sizeof *dst->v)))
        return AS_ENOMEM;
    for (size_t i = 0; i < src->n; i++) {
        if (!(dst->v[i] = strdup(src->v[i]))) {
            dst->n = i;
            shard_names_free(dst);
            return AS_ENOMEM;
        }
    }
    dst->n = src->n;
    return AS_OK;
}

/* See shard.h. */
bool shard_foreign_status(const k8s_shard *s, const char *own_manager, int64_t now_unix_s,
                          int64_t window_s, int64_t *age_s)
{
    if (age_s)
        *age_s = -1;
    if (!s || !s->status_manager[0] || (own_manager && strcmp(s->status_manager, own_manager) == 0))
        return false;
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *end = strptime(s->status_time, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!end || (*end != 'Z' && *end != '.'))
        return true;
    int64_t age = now_unix_s - (int64_t)timegm(&tm);
    if (age_s)
        *age_s = age;
    return age <= window_s;
}

/* Own NodeShard absent: the last nodesDesired seen stands in for it (no
 * status of its own), so the usable set is that minus the other shards'
 * nodesInUse. */
static as_err compute_with_last(shard_coord *c, const k8s_shard *shards, size_t n, shard_view *v)
{
    k8s_shard *all = calloc(n + 1, sizeof *all);
    if (!all)
        return AS_ENOMEM;
    if (n)
        memcpy(all, shards, n * sizeof *all);
    all[n].name = c->name;
    all[n].nodes_desired = c->last_desired.v;
    all[n].n_desired = c->last_desired.n;
    as_err err = shard_compute(all, n + 1, c->name, v);
    free(all);
    return err;
}

static void check_foreign_status(shard_coord *c, const k8s_shard *shards, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const k8s_shard *s = &shards[i];
        if (!s->name || strcmp(s->name, c->name) != 0)
            continue;
        int64_t age = -1;
        if (!shard_foreign_status(s, SHARD_OWN_MANAGER, (int64_t)time(NULL), 300, &age) ||
            strcmp(c->foreign_seen, s->status_time) == 0)
            return;
        snprintf(c->foreign_seen, sizeof c->foreign_seen, "%s", s->status_time);
        pthread_mutex_lock(&c->mu);
        c->st.foreign_status++;
        pthread_mutex_unlock(&c->mu);
        log_warn("msg=\"another scheduler publishes status on our NodeShard; give one of them "
                 "another shard (--shard-name)\" shard=%s manager=%s written=%s age_s=%lld",
                 c->name, s->status_manager, s->status_time, (long long)age);
        return;
    }
}

/* See shard.h. */
as_err shard_coord_update(shard_coord *c, const k8s_shard *shards, size_t n)
{
    shard_view v;
    as_err err = shard_compute(shards, n, c->name, &v);
    if (err)
        return err;
    bool kept = false;
    if (v.own_present) {
        shard_names last;
        if ((err = names_copy(&v.desired, &last))) {
            shard_view_free(&v);
            return err;
        }
        shard_names_free(&c->last_desired);
        c->last_desired = last;
        c->have_last = true;
        c->logged_absent = false;
        check_foreign_status(c, shards, n);
    } else if (c->have_last) {
        /* As Volcano's schedulers: the last node set stays (less what
         * other shards now use) until the NodeShard returns. */
        shard_view_free(&v);
        if ((err = compute_with_last(c, shards, n, &v)))
            return err;
        v.own_present = false;
        kept = true;
    }
    if (!v.own_present && !c->logged_absent) {
        c->logged_absent = true;
        if (kept)
            log_warn("msg=\"own NodeShard absent: keeping its last nodesDesired\" shard=%s "
                     "mode=%s desired=%zu usable=%zu",
                     c->name, cache_shard_mode_name(c->cfg.mode), v.desired.n, v.usable.n);
        else
            log_warn("msg=\"own NodeShard absent: usable set is empty\" shard=%s mode=%s", c->name,
                     cache_shard_mode_name(c->cfg.mode));
    }
    pthread_mutex_lock(&c->mu);
    c->st.updates++;
    c->st.own_present = v.own_present;
    c->st.kept_last = kept;
    c->st.usable = v.usable.n;
    c->st.to_add = v.to_add.n;
    bool changed = !c->have_applied || !names_equal(&c->applied, &v.usable);
    pthread_mutex_unlock(&c->mu);

    if (c->cfg.mode == CACHE_SHARD_NONE) {
        shard_view_free(&v);
        return AS_OK;
    }
    uint64_t rev = cache_shard_revision(c->cfg.cache);
    shard_names snap = {0};
    if (changed) {
        /* Only the reflector thread updates, so `applied` is ours between
         * the locks; the cache does the O(changed) membership diff. */
        if ((err = cache_shard_apply(c->cfg.cache, (const char *const *)v.usable.v, v.usable.n,
                                     &rev)) ||
            (err = names_copy(&v.usable, &snap))) {
            shard_view_free(&v);
            return err;
        }
        log_info("msg=\"shard applied\" shard=%s usable=%zu to_add=%zu to_remove=%zu "
                 "revision=%llu",
                 c->name, v.usable.n, v.to_add.n, v.to_remove.n, (unsigned long long)rev);
    }
    pthread_mutex_lock(&c->mu);
    if (changed) {
        shard_names_free(&c->applied);
        c->applied = snap;
        c->have_applied = true;
        c->st.applies++;
    }
    /* Publish when the set changed, or when the object's status disagrees
     * with what we hold (first start, someone else rewrote it). */
    bool want = changed || !v.status_current;
    if (v.own_present && want) {
        shard_view_free(&c->pending);
        c->pending = v;
        memset(&v, 0, sizeof v);
        c->pending_rev = rev ? rev : 1;
        c->st.pending_revision = c->pending_rev;
        c->retry_at_ms = 0;
        pthread_cond_broadcast(&c->cond);
    }
    pthread_mutex_unlock(&c->mu);
    shard_view_free(&v);
    return AS_OK;
}

/* See shard.h. */
as_err shard_coord_publish_now(shard_coord *c, bool *published, as_diag *diag)
{
    if (published)
        *published = false;
    pthread_mutex_lock(&c->mu);
    if (!c->pending_rev) {
        pthread_mutex_unlock(&c->mu);
        return AS_OK;
    }
    if (!gate_open(c)) {
        if (!c->publishing)
            c->st.gated++;
        pthread_mutex_unlock(&c->mu);
        return AS_OK;
    }
    uint64_t rev = c->pending_rev;
    shard_view v = c->pending;
    memset(&c->pending, 0, sizeof c->pending);
    c->publishing = true;
    c->st.publishing_revision = rev;
    pthread_mutex_unlock(&c->mu);

    as_err err = c->cfg.publish ? c->cfg.publish(c->cfg.publish_arg, c->name, &v, diag) : AS_OK;

    pthread_mutex_lock(&c->mu);
    c->publishing = false;
    c->st.publishing_revision = 0;
    if (err == AS_OK) {
        c->st.published++;
        c->st.published_revision = rev;
        if (c->pending_rev == rev) {
            c->pending_rev = 0;
            c->st.pending_revision = 0;
        }
        shard_view_free(&v);
        if (published)
            *published = true;
    } else {
        c->st.publish_failed++;
        c->retry_at_ms = clock_mono_ms() + c->cfg.retry_ms;
        if (c->pending_rev == rev)
            c->pending = v; /* retry the same status */
        else
            shard_view_free(&v); /* a newer one is queued */
    }
    pthread_mutex_unlock(&c->mu);
    return err;
}

static void *publisher_main(void *arg)
{
    shard_coord *c = arg;
    pthread_setname_np(pthread_self(), "as-shard-pub");
    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        int64_t now = clock_mono_ms();
        if (gate_open(c) && now >= c->retry_at_ms) {
            pthread_mutex_unlock(&c->mu);
            as_diag d = {0};
            as_err err = shard_coord_publish_now(c, NULL, &d);
            if (err)
                log_warn("msg=\"NodeShard status publish failed; will retry\" shard=%s "
                         "error=\"%s\"",
                         c->name, d.msg[0] ? d.msg : as_strerror(err));
            pthread_mutex_lock(&c->mu);
            continue;
        }
        int64_t wait = c->pending_rev && c->retry_at_ms > now ? c->retry_at_ms - now : 1000;
        struct timespec ts = clock_deadline_ms(wait);
        pthread_cond_timedwait(&c->cond, &c->mu, &ts);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* See shard.h. */
as_err shard_coord_start(shard_coord *c)
{
    if (c->thread_started)
        return AS_OK;
    if (pthread_create(&c->thread, NULL, publisher_main, c) != 0)
        return AS_ENOMEM;
    c->thread_started = true;
    return AS_OK;
}

/* See shard.h. */
void shard_coord_free(shard_coord *c)
{
    if (!c)
        return;
    if (c->thread_started) {
        pthread_mutex_lock(&c->mu);
        c->stop = true;
        pthread_cond_broadcast(&c->cond);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->thread, NULL);
    }
    shard_names_free(&c->applied);
    shard_names_free(&c->last_desired);
    shard_view_free(&c->pending);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cond);
    free(c->name);
    free(c);
}

/* See shard.h. */
void shard_coord_get_stats(shard_coord *c, shard_coord_stats *out)
{
    pthread_mutex_lock(&c->mu);
    *out = c->st;
    pthread_mutex_unlock(&c->mu);
}

/* See shard.h. */
void shard_k8s_hook(void *arg, k8s_client *k)
{
    shard_coord *c = arg;
    k8s_shard *v = NULL;
    size_t n = 0;
    as_err err = k8s_shards_copy(k, &v, &n);
    if (!err)
        err = shard_coord_update(c, v, n);
    if (err)
        log_error("msg=\"shard update failed\" shard=%s error=%s", c->name, as_strerror(err));
    k8s_shards_free(v, n);
}

static json_t *names_json(const shard_names *s)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < s->n; i++)
        if (json_array_append_new(a, json_string(s->v[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* See shard.h. */
as_err shard_publish_k8s(void *arg, const char *name, const shard_view *st, as_diag *diag)
{
    char ts[32];
    clock_rfc3339(clock_now_us(), 0, ts, sizeof ts);
    json_t *status = json_pack("{s:o,s:o,s:o,s:s}", "nodesInUse", names_json(&st->usable),
                               "nodesToRemove", names_json(&st->to_remove), "nodesToAdd",
                               names_json(&st->to_add), "lastUpdateTime", ts);
    if (!status)
        return AS_ENOMEM;
    as_err err = k8s_shard_patch_status(arg, name, status, diag);
    json_decref(status);
    if (err == AS_OK)
        log_info("msg=\"NodeShard status published\" shard=%s in_use=%zu to_add=%zu "
                 "to_remove=%zu",
                 name, st->usable.n, st->to_add.n, st->to_remove.n);
    return err;
}

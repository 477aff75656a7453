/*
 * owner.c - see owner.h: is another sharding controller writing the
 * NodeShards? Pure: the shard controller feeds it the Lease it polls and
 * the NodeShard table its reflector keeps.
 */
#include "agentsched/shard/owner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* See owner.h. */
void shard_owner_init(shard_owner *o, const char *manager)
{
    memset(o, 0, sizeof *o);
    snprintf(o->manager, sizeof o->manager, "%s", manager ? manager : "");
}

/* See owner.h. */
void shard_owner_free(shard_owner *o)
{
    free(o->base);
    o->base = NULL;
    o->nbase = 0;
}

/* See owner.h. */
bool shard_owner_lease_live(const k8s_lease_obs *obs, int64_t now_ms)
{
    return obs->exists && obs->holder[0] && now_ms - obs->observed_ms <= obs->duration_ms;
}

/* See owner.h. */
int64_t shard_owner_parse_time(const char *s)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (!end || (*end != 'Z' && *end != '.'))
        return -1;
    return (int64_t)timegm(&tm);
}

static bool in_base(const shard_owner *o, const k8s_shard *s)
{
    for (size_t i = 0; i < o->nbase; i++)
        if (strcmp(o->base[i].shard, s->name) == 0)
            return strcmp(o->base[i].time, s->desired_time) == 0;
    return false;
}

/* See owner.h. */
as_err shard_owner_step(shard_owner *o, bool lease_live, const char *acquire_time,
                        const k8s_shard *shards, size_t n, bool *foreign)
{
    size_t owned = 0, fresh = 0, before_holder = 0;
    const char *first = NULL;
    int64_t acquired = shard_owner_parse_time(acquire_time);
    for (size_t i = 0; i < n; i++) {
        const k8s_shard *s = &shards[i];
        if (!o->manager[0] || !s->name || strcmp(s->desired_manager, o->manager) != 0)
            continue;
        owned++;
        int64_t t = shard_owner_parse_time(s->desired_time);
        if (acquired >= 0 && t >= 0 && t < acquired - SHARD_OWNER_SKEW_S) {
            before_holder++; /* an earlier process's */
            continue;
        }
        if (!in_base(o, s)) {
            fresh++;
            if (!first)
                first = s->name;
        }
    }
    bool f = lease_live && fresh > 0;
    if (!f) {
        shard_owner_entry *b = NULL;
        if (owned && !(b = calloc(owned, sizeof *b))) {
            *foreign = o->foreign;
            return AS_ENOMEM;
        }
        size_t k = 0;
        for (size_t i = 0; i < n && k < owned; i++) {
            const k8s_shard *s = &shards[i];
            if (!s->name || strcmp(s->desired_manager, o->manager) != 0)
                continue;
            snprintf(b[k].shard, sizeof b[k].shard, "%s", s->name);
            snprintf(b[k].time, sizeof b[k].time, "%s", s->desired_time);
            k++;
        }
        free(o->base);
        o->base = b;
        o->nbase = k;
    }
    if (f)
        snprintf(o->why, sizeof o->why,
                 "lease live and %s owns nodesDesired of %zu NodeShard(s) (first %s)", o->manager,
                 fresh, first);
    else if (!lease_live)
        snprintf(o->why, sizeof o->why, "lease not held or expired (%zu NodeShard(s) left by %s)",
                 owned, o->manager);
    else if (before_holder)
        snprintf(
            o->why, sizeof o->why,
            "lease live but %zu nodesDesired entries of %s predate its holder's acquireTime %s",
            before_holder, o->manager, acquire_time);
    else
        snprintf(o->why, sizeof o->why, "lease live but %s wrote no nodesDesired since %s",
                 o->manager, owned ? "we took over" : "ever");
    o->foreign = f;
    *foreign = f;
    return AS_OK;
}

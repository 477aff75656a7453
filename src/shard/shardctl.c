/*
 * shardctl.c - the sharding controller's assignment engine (see
 * shardctl.h); its config is shardcfg.c.
 */
#include "agentsched/shard/shardctl.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agentsched/base/doc.h"
#include "agentsched/base/log.h"
#include "agentsched/base/table.h"

/* ------------------------------------------------------------------ */
/* Engine                                                              */
/* ------------------------------------------------------------------ */

typedef struct enode {
    char *name;
    uint64_t tag, epoch;
    uint32_t elig;  /* bit s: scheduler s's filter accepts it */
    int owner;      /* scheduler index, -1 none */
    int pass_owner; /* scratch of a selection pass */
    uint64_t dmark; /* == engine dgen while in the dirty list */
    uint32_t batch; /* batched mode: its batch (rank by name / SHARDCTL_BATCH) */
    double *score;  /* per scheduler (valid where elig) */
    bool live;
} enode;

typedef struct eent {
    double score;
    uint32_t node;
} eent;

typedef struct esched {
    eent *v;
    size_t n, cap;
    size_t members;
    uint64_t version;
    /* With a cap and members == cap: the last member in array order
     * (node and its score when it became the boundary). */
    bool bvalid;
    uint32_t bnode;
    double bscore;
} esched;

struct shardctl_engine {
    const shardcfg_config *cfg;
    size_t ns;
    enode *nodes;
    size_t nnodes, cap_nodes;
    uint32_t *free_ids; /* recycled node slots */
    size_t nfree, cap_free;
    table map; /* live node name (key owned by the enode) -> index + 1 */
    esched s[SHARDCFG_MAX_SCHEDULERS];
    size_t live, unfit, capped;
    uint64_t fast_updates, passes, resyncs;
    /* Nodes whose owner a cascade touched (deduplicated by dmark). */
    uint32_t *dirty;
    size_t ndirty, cap_dirty;
    uint64_t dgen;
    /* Batched mode (see shardctl.h): some scheduler has a cap and more
     * than SHARDCTL_BATCH nodes are live. order: the live nodes by name
     * (valid while the node set is unchanged); batched: the owners were
     * last computed batch by batch (the boundaries are stale). */
    bool any_cap, order_valid, batched;
    /* Nodes joined or left in batched mode: every batch is reselected at
     * the next read (settle), once for a burst of joins. */
    bool stale;
    uint32_t *order;
    size_t norder, cap_order;
};

/* Index of name, or -1. */
static long map_find(const shardctl_engine *e, const char *name)
{
    void *v = table_get(&e->map, name, strlen(name));
    return v ? (long)((uintptr_t)v - 1) : -1;
}

static void map_del(shardctl_engine *e, const char *name)
{
    table_del(&e->map, name, strlen(name));
}

/* map_add indexes node idx, whose name must not be indexed yet. */
static as_err map_add(shardctl_engine *e, uint32_t idx)
{
    const char *name = e->nodes[idx].name;
    return table_put(&e->map, name, strlen(name), (void *)((uintptr_t)idx + 1));
}

/* See shardctl.h. */
as_err shardctl_engine_new(const shardcfg_config *cfg, shardctl_engine **out)
{
    if (!cfg || cfg->n == 0 || cfg->n > SHARDCFG_MAX_SCHEDULERS)
        return AS_EINVAL;
    shardctl_engine *e = calloc(1, sizeof *e);
    if (!e)
        return AS_ENOMEM;
    e->cfg = cfg;
    e->ns = cfg->n;
    for (size_t s = 0; s < cfg->n; s++)
        e->any_cap |= cfg->sched[s].max_nodes > 0;
    *out = e;
    return AS_OK;
}

/* See shardctl.h. */
void shardctl_engine_free(shardctl_engine *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->nnodes; i++) {
        free(e->nodes[i].name);
        free(e->nodes[i].score);
    }
    free(e->nodes);
    free(e->free_ids);
    table_free(&e->map);
    free(e->dirty);
    free(e->order);
    for (size_t s = 0; s < e->ns; s++)
        free(e->s[s].v);
    free(e);
}

/* Volcano's allocation-rate compares utilisation and band in hundredths:
 * 0.695 is 0.70, so the bands [0, 0.69] and [0.7, 1] leave no gap. */
static double util_round(double u)
{
    return round(u * 100) / 100;
}

/* See shardctl.h. */
double shardctl_node_util(const shardctl_node_info *n)
{
    if (n->cpu_capacity <= 0)
        return 0;
    double u = (double)n->cpu_requested / (double)n->cpu_capacity;
    return util_round(u > 1 ? 1 : u);
}

/* Filter and score node n for scheduler sc; false when filtered out. */
static bool eval_sched(const shardcfg_sched *sc, const shardctl_node_info *n, double *score)
{
    double util = shardctl_node_util(n);
    double sum = 0;
    for (size_t j = 0; j < sc->npol; j++) {
        const shardcfg_policy *p = &sc->pol[j];
        switch (p->kind) {
        case SHARDCFG_POL_ALLOCATION_RATE: {
            /* Outside the band: not this scheduler's. */
            double lo = util_round(p->min_util), hi = util_round(p->max_util);
            if (util < lo || util > hi)
                return false;
            double span = hi - lo;
            double v = span > 0 ? (util - lo) / span : 1.0;
            sum += p->weight * (v < 0 ? 0 : v > 1 ? 1 : v);
            break;
        }
        case SHARDCFG_POL_WARMUP: {
            const char *v = n->labels ? model_labels_get(n->labels, p->label) : NULL;
            if (v && strcmp(v, p->label_value) == 0)
                sum += p->weight;
            break;
        }
        case SHARDCFG_POL_NODE_LIMIT:
            break;
        }
    }
    *score = sum;
    return true;
}

/* Order of a scheduler's sorted array: score desc, then name asc. */
static int ent_cmp(const shardctl_engine *e, double sa, uint32_t a, double sb, uint32_t b)
{
    if (sa > sb)
        return -1;
    if (sa < sb)
        return 1;
    return strcmp(e->nodes[a].name, e->nodes[b].name);
}

/* First position whose entry is not before (score, node). */
static size_t ent_lower(const shardctl_engine *e, const esched *s, double score, uint32_t node)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ent_cmp(e, s->v[mid].score, s->v[mid].node, score, node) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static as_err ent_insert(shardctl_engine *e, esched *s, double score, uint32_t node)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        eent *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return AS_ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    size_t at = ent_lower(e, s, score, node);
    memmove(&s->v[at + 1], &s->v[at], (s->n - at) * sizeof *s->v);
    s->v[at] = (eent){score, node};
    s->n++;
    return AS_OK;
}

static void ent_remove(shardctl_engine *e, esched *s, double score, uint32_t node)
{
    size_t at = ent_lower(e, s, score, node);
    if (at >= s->n || s->v[at].node != node) {
        log_error("msg=\"shardctl engine: sorted entry missing\" node=%s", e->nodes[node].name);
        return;
    }
    memmove(&s->v[at], &s->v[at + 1], (s->n - at - 1) * sizeof *s->v);
    s->n--;
}

/* Moves node i to owner o, keeping counts and versions. */
static void set_owner(shardctl_engine *e, uint32_t i, int o)
{
    enode *n = &e->nodes[i];
    if (n->owner == o)
        return;
    if (n->owner >= 0) {
        e->s[n->owner].members--;
        e->s[n->owner].version++;
    }
    if (o >= 0) {
        e->s[o].members++;
        e->s[o].version++;
    }
    n->owner = o;
}

static void count_unassigned(shardctl_engine *e, uint32_t i, int delta)
{
    const enode *n = &e->nodes[i];
    if (n->owner >= 0)
        return;
    if (!n->elig)
        e->unfit = (size_t)((long)e->unfit + delta);
    else
        e->capped = (size_t)((long)e->capped + delta);
}

/* Recomputes scheduler s's boundary by scanning back from position top
 * (every member is at or before it). */
static void fix_boundary(shardctl_engine *e, size_t s, size_t top)
{
    esched *es = &e->s[s];
    long cap = e->cfg->sched[s].max_nodes;
    es->bvalid = false;
    if (cap <= 0 || es->members < (size_t)cap || es->n == 0)
        return;
    if (top >= es->n)
        top = es->n - 1;
    for (size_t k = top + 1; k-- > 0;)
        if (e->nodes[es->v[k].node].owner == (int)s) {
            es->bvalid = true;
            es->bnode = es->v[k].node;
            es->bscore = es->v[k].score;
            return;
        }
}

/* take_pass_owners makes each live node's pass_owner its owner and counts
 * the unassigned ones again from zero (after a whole pass, either mode). */
static void take_pass_owners(shardctl_engine *e)
{
    e->unfit = e->capped = 0;
    for (size_t i = 0; i < e->nnodes; i++) {
        if (!e->nodes[i].live)
            continue;
        set_owner(e, (uint32_t)i, e->nodes[i].pass_owner);
        count_unassigned(e, (uint32_t)i, +1);
    }
}

/* The linear selection pass: schedulers in order each take the first
 * max_nodes entries of their sorted array not taken by an earlier one. */
static void select_pass(shardctl_engine *e)
{
    e->passes++;
    for (size_t i = 0; i < e->nnodes; i++)
        e->nodes[i].pass_owner = -1;
    for (size_t s = 0; s < e->ns; s++) {
        long max = e->cfg->sched[s].max_nodes;
        size_t taken = 0;
        for (size_t k = 0; k < e->s[s].n && (max <= 0 || taken < (size_t)max); k++) {
            enode *n = &e->nodes[e->s[s].v[k].node];
            if (n->pass_owner >= 0)
                continue;
            n->pass_owner = (int)s;
            taken++;
        }
    }
    take_pass_owners(e);
    for (size_t s = 0; s < e->ns; s++)
        fix_boundary(e, s, e->s[s].n ? e->s[s].n - 1 : 0);
}

/* ---- batched mode --------------------------------------------------- */

static bool want_batched(const shardctl_engine *e)
{
    return e->any_cap && e->live > SHARDCTL_BATCH;
}

typedef struct name_ent {
    const char *name;
    uint32_t node;
} name_ent;

static int name_ent_cmp(const void *a, const void *b)
{
    return strcmp(((const name_ent *)a)->name, ((const name_ent *)b)->name);
}

/* Puts the live nodes in name order and gives each its batch. */
static as_err build_order(shardctl_engine *e)
{
    if (e->order_valid)
        return AS_OK;
    as_err err = AS_OK;
    name_ent *tmp = malloc((e->live ? e->live : 1) * sizeof *tmp);
    if (!tmp)
        return AS_ENOMEM;
    if (e->cap_order < e->live) {
        uint32_t *v = realloc(e->order, e->live * sizeof *v);
        if (!v) {
            err = AS_ENOMEM;
            goto done;
        }
        e->order = v;
        e->cap_order = e->live;
    }
    size_t k = 0;
    for (size_t i = 0; i < e->nnodes && k < e->live; i++)
        if (e->nodes[i].live)
            tmp[k++] = (name_ent){e->nodes[i].name, (uint32_t)i};
    qsort(tmp, k, sizeof *tmp, name_ent_cmp);
    for (size_t j = 0; j < k; j++) {
        e->order[j] = tmp[j].node;
        e->nodes[tmp[j].node].batch = (uint32_t)(j / SHARDCTL_BATCH);
    }
    e->norder = k;
    e->order_valid = true;
done:
    free(tmp);
    return err;
}

/*
 * select_batch runs batch b's selection as Volcano's controller runs each
 * batch: schedulers in config order, each taking, among the batch's nodes
 * its filter accepts and no earlier scheduler took, the first max_nodes by
 * score (descending; a stable sort of the batch in name order, so ties go
 * by name). Sets pass_owner of the batch's nodes.
 */
static void select_batch(shardctl_engine *e, size_t b)
{
    size_t lo = b * SHARDCTL_BATCH, hi = lo + SHARDCTL_BATCH;
    if (hi > e->norder)
        hi = e->norder;
    for (size_t k = lo; k < hi; k++)
        e->nodes[e->order[k]].pass_owner = -1;
    for (size_t s = 0; s < e->ns; s++) {
        uint32_t cand[SHARDCTL_BATCH];
        size_t m = 0;
        for (size_t k = lo; k < hi; k++) {
            uint32_t y = e->order[k];
            const enode *n = &e->nodes[y];
            if (!((n->elig >> s) & 1) || n->pass_owner >= 0)
                continue;
            size_t j = m++;
            while (j > 0 && e->nodes[cand[j - 1]].score[s] < n->score[s]) {
                cand[j] = cand[j - 1];
                j--;
            }
            cand[j] = y;
        }
        long max = e->cfg->sched[s].max_nodes;
        size_t take = max > 0 && (size_t)max < m ? (size_t)max : m;
        for (size_t j = 0; j < take; j++)
            e->nodes[cand[j]].pass_owner = (int)s;
    }
}

/* Every batch's selection; the owners and unassigned counts from it. */
static as_err batched_pass(shardctl_engine *e)
{
    as_err err = build_order(e);
    if (err)
        return err;
    e->passes++;
    for (size_t b = 0; b * SHARDCTL_BATCH < e->norder; b++)
        select_batch(e, b);
    take_pass_owners(e);
    for (size_t s = 0; s < e->ns; s++)
        e->s[s].bvalid = false;
    e->batched = true;
    return AS_OK;
}

/* relayout recomputes every owner: batch by batch in batched mode, else
 * the whole-shard pass (which also sets the boundaries the cascade needs,
 * and stands in when the batches cannot be built). */
static as_err relayout(shardctl_engine *e)
{
    as_err err = AS_OK;
    if (want_batched(e) && !(err = batched_pass(e)))
        return AS_OK;
    e->batched = false;
    select_pass(e);
    return err;
}

/* settle brings the owners up to date before a read: the relayout that
 * joins and departures in batched mode put off. */
static void settle(shardctl_engine *e)
{
    if (!e->stale)
        return;
    e->stale = false;
    if (relayout(e))
        log_error("msg=\"shardctl engine: out of memory for the batches; whole-shard "
                  "selection until the next change\"");
}

/* Node x's batch again after x changed (x already out of the unassigned
 * counts): the other batches cannot change. */
static void reselect_batch(shardctl_engine *e, uint32_t x)
{
    size_t b = e->nodes[x].batch;
    size_t lo = b * SHARDCTL_BATCH, hi = lo + SHARDCTL_BATCH;
    if (hi > e->norder)
        hi = e->norder;
    for (size_t k = lo; k < hi; k++)
        if (e->order[k] != x)
            count_unassigned(e, e->order[k], -1);
    select_batch(e, b);
    for (size_t k = lo; k < hi; k++) {
        set_owner(e, e->order[k], e->nodes[e->order[k]].pass_owner);
        count_unassigned(e, e->order[k], +1);
    }
}

static bool avail(const shardctl_engine *e, uint32_t y, size_t s)
{
    const enode *n = &e->nodes[y];
    return ((n->elig >> s) & 1) && !(n->owner >= 0 && n->owner < (int)s);
}

/* Puts y on the dirty list (once per cascade), taking it out of the
 * unassigned counts while its old state is still in place. */
static as_err dirty_add(shardctl_engine *e, uint32_t y, bool count)
{
    enode *n = &e->nodes[y];
    if (n->dmark == e->dgen)
        return AS_OK;
    if (e->ndirty == e->cap_dirty) {
        size_t cap = e->cap_dirty ? e->cap_dirty * 2 : 64;
        uint32_t *v = realloc(e->dirty, cap * sizeof *v);
        if (!v)
            return AS_ENOMEM;
        e->dirty = v;
        e->cap_dirty = cap;
    }
    n->dmark = e->dgen;
    e->dirty[e->ndirty++] = y;
    if (count)
        count_unassigned(e, y, -1);
    return AS_OK;
}

static as_err move(shardctl_engine *e, uint32_t y, int o)
{
    as_err err = dirty_add(e, y, true);
    if (err)
        return err;
    set_owner(e, y, o);
    return AS_OK;
}

/*
 * cascade brings the owners up to date after node x's sorted entries
 * changed (x already out of the unassigned counts). Schedulers in order:
 * without a cap, a scheduler owns exactly its available nodes, so only
 * dirty nodes can change; with a cap, the members are the first `cap`
 * available entries, and a change can only (a) drop a dirty member, (b)
 * admit a dirty node ahead of the boundary, evicting the last member, or
 * (c) refill freed slots from the old boundary on. Every owner change is
 * itself dirty for the later schedulers. Cost: dirty nodes times
 * schedulers, plus the entries skipped while walking from a boundary
 * (those owned by earlier schedulers).
 */
static as_err cascade(shardctl_engine *e, uint32_t x)
{
    e->dgen++;
    e->ndirty = 0;
    as_err err = dirty_add(e, x, false);
    for (size_t s = 0; s < e->ns && !err; s++) {
        esched *es = &e->s[s];
        long cap = e->cfg->sched[s].max_nodes;
        size_t nd = e->ndirty;
        if (cap <= 0) {
            for (size_t k = 0; k < nd && !err; k++) {
                uint32_t y = e->dirty[k];
                bool av = avail(e, y, s);
                if (av && e->nodes[y].owner != (int)s)
                    err = move(e, y, (int)s);
                else if (!av && e->nodes[y].owner == (int)s)
                    err = move(e, y, -1);
            }
            continue;
        }
        bool had_b = es->bvalid;
        size_t bpos = had_b ? ent_lower(e, es, es->bscore, es->bnode) : 0;
        /* Every member sits at or before `top`. */
        size_t top = had_b ? bpos : (es->n ? es->n - 1 : 0);
        for (size_t k = 0; k < nd && !err; k++) {
            uint32_t y = e->dirty[k];
            if (e->nodes[y].owner == (int)s && (y == x || !avail(e, y, s)))
                err = move(e, y, -1);
        }
        for (size_t k = 0; k < nd && !err; k++) {
            uint32_t y = e->dirty[k];
            if (e->nodes[y].owner == (int)s || !avail(e, y, s))
                continue;
            size_t pos = ent_lower(e, es, e->nodes[y].score[s], y);
            if (had_b && pos > bpos)
                continue; /* behind the boundary: the refill meets it in order */
            err = move(e, y, (int)s);
            if (pos > top)
                top = pos;
        }
        for (size_t k = top + 1; es->members > (size_t)cap && k-- > 0 && !err;)
            if (k < es->n && e->nodes[es->v[k].node].owner == (int)s)
                err = move(e, es->v[k].node, -1);
        if (had_b)
            for (size_t k = bpos; k < es->n && es->members < (size_t)cap && !err; k++) {
                uint32_t z = es->v[k].node;
                if (e->nodes[z].owner != (int)s && avail(e, z, s)) {
                    err = move(e, z, (int)s);
                    if (k > top)
                        top = k;
                }
            }
        fix_boundary(e, s, top);
    }
    for (size_t k = 0; k < e->ndirty; k++)
        count_unassigned(e, e->dirty[k], +1);
    return err;
}

static void log_unfit_transition(const enode *n, uint32_t old_elig, bool was_live)
{
    if (!n->elig && (old_elig || !was_live))
        log_warn("msg=\"node fits no scheduler's shard filter\" node=%s", n->name);
    else if (n->elig && !old_elig && was_live)
        log_info("msg=\"node fits a shard again\" node=%s", n->name);
}

/* Re-evaluates node i against every scheduler; keeps the sorted arrays. */
static as_err rescore(shardctl_engine *e, uint32_t i, const shardctl_node_info *info, bool *moved)
{
    enode *n = &e->nodes[i];
    *moved = false;
    for (size_t s = 0; s < e->ns; s++) {
        double sc = 0;
        bool ok = eval_sched(&e->cfg->sched[s], info, &sc);
        bool was = (n->elig >> s) & 1;
        if (was != ok || (ok && sc != n->score[s]))
            *moved = true;
        if (was && (!ok || sc != n->score[s]))
            ent_remove(e, &e->s[s], n->score[s], i);
        if (ok && (!was || sc != n->score[s])) {
            n->score[s] = sc;
            as_err err = ent_insert(e, &e->s[s], sc, i);
            if (err) {
                n->elig &= ~(1u << s);
                return err;
            }
        }
        if (ok)
            n->elig |= 1u << s;
        else
            n->elig &= ~(1u << s);
    }
    return AS_OK;
}

static as_err node_slot(shardctl_engine *e, const char *name, uint32_t *out)
{
    uint32_t i;
    if (e->nfree) {
        i = e->free_ids[--e->nfree];
    } else {
        if (e->nnodes >= SHARDCTL_MAX_NODES)
            return AS_ELIMIT;
        if (e->nnodes == e->cap_nodes) {
            size_t cap = e->cap_nodes ? e->cap_nodes * 2 : 256;
            enode *v = realloc(e->nodes, cap * sizeof *v);
            if (!v)
                return AS_ENOMEM;
            e->nodes = v;
            e->cap_nodes = cap;
        }
        i = (uint32_t)e->nnodes;
        memset(&e->nodes[i], 0, sizeof e->nodes[i]);
        if (!(e->nodes[i].score = calloc(e->ns, sizeof(double))))
            return AS_ENOMEM;
        e->nnodes++;
    }
    if (e->cap_free < e->nnodes) {
        /* Every slot may end up free at once. */
        size_t cap = e->nnodes * 2;
        uint32_t *f = realloc(e->free_ids, cap * sizeof *f);
        if (!f)
            return AS_ENOMEM;
        e->free_ids = f;
        e->cap_free = cap;
    }
    enode *n = &e->nodes[i];
    if (!(n->name = strdup(name))) {
        e->free_ids[e->nfree++] = i;
        return AS_ENOMEM;
    }
    n->owner = -1;
    n->elig = 0;
    as_err err = map_add(e, i);
    if (err) {
        free(n->name);
        n->name = NULL;
        e->free_ids[e->nfree++] = i;
        return err;
    }
    n->live = true;
    e->live++;
    *out = i;
    return AS_OK;
}

/* See shardctl.h. */
as_err shardctl_engine_set_node(shardctl_engine *e, const shardctl_node_info *info, uint64_t epoch)
{
    if (!info || !info->name || !*info->name)
        return AS_EINVAL;
    long found = map_find(e, info->name);
    bool was_live = found >= 0;
    uint32_t i;
    as_err err;
    if (found >= 0) {
        i = (uint32_t)found;
    } else if ((err = node_slot(e, info->name, &i))) {
        return err;
    }
    enode *n = &e->nodes[i];
    n->tag = info->tag;
    n->epoch = epoch;
    uint32_t old_elig = n->elig;
    if (was_live)
        count_unassigned(e, i, -1);
    bool moved = false;
    err = rescore(e, i, info, &moved);
    log_unfit_transition(n, old_elig, was_live);
    e->fast_updates++;
    if (!was_live)
        e->order_valid = false; /* a new name shifts the batches after it */
    if (e->stale || e->batched || want_batched(e)) {
        if (e->stale || !was_live || !e->order_valid) {
            e->stale = true; /* settle recounts everything */
            return err;
        }
        if (!moved)
            count_unassigned(e, i, +1);
        else
            reselect_batch(e, i);
        return err;
    }
    if (was_live && !moved) {
        /* No sorted array changed: neither did any owner. */
        count_unassigned(e, i, +1);
        return err;
    }
    as_err cerr = cascade(e, i);
    if (cerr) {
        select_pass(e); /* out of memory mid-cascade: recompute in place */
        return cerr;
    }
    return err;
}

static void drop_node(shardctl_engine *e, uint32_t i)
{
    enode *n = &e->nodes[i];
    /* Batched before or after: the batches after its name shift. */
    bool rebatch = e->stale || e->batched || (e->any_cap && e->live - 1 > SHARDCTL_BATCH);
    count_unassigned(e, i, -1);
    for (size_t s = 0; s < e->ns; s++)
        if ((n->elig >> s) & 1)
            ent_remove(e, &e->s[s], n->score[s], i);
    n->elig = 0;
    /* Its slots go to the next in line (the name is still valid here). */
    if (!rebatch) {
        if (cascade(e, i))
            select_pass(e);
        count_unassigned(e, i, -1);
    }
    set_owner(e, i, -1);
    map_del(e, n->name);
    free(n->name);
    n->name = NULL;
    n->elig = 0;
    n->live = false;
    e->live--;
    e->free_ids[e->nfree++] = i;
    if (rebatch) {
        e->order_valid = false;
        e->stale = true;
    }
}

/* See shardctl.h. */
as_err shardctl_engine_remove_node(shardctl_engine *e, const char *name)
{
    long i = map_find(e, name);
    if (i < 0)
        return AS_ENOTFOUND;
    drop_node(e, (uint32_t)i);
    return AS_OK;
}

/* See shardctl.h. */
bool shardctl_engine_seen(shardctl_engine *e, const char *name, uint64_t epoch, uint64_t *tag)
{
    long i = map_find(e, name);
    if (i < 0)
        return false;
    e->nodes[i].epoch = epoch;
    if (tag)
        *tag = e->nodes[i].tag;
    return true;
}

/* See shardctl.h. */
as_err shardctl_engine_sweep(shardctl_engine *e, uint64_t epoch, size_t *removed)
{
    size_t k = 0;
    for (size_t i = 0; i < e->nnodes; i++)
        if (e->nodes[i].live && e->nodes[i].epoch != epoch) {
            drop_node(e, (uint32_t)i);
            k++;
        }
    if (removed)
        *removed = k;
    return AS_OK;
}

typedef struct sort_ctx_ent {
    double score;
    uint32_t node;
    const char *name;
} sort_ctx_ent;

static int sort_ent_cmp(const void *a, const void *b)
{
    const sort_ctx_ent *x = a, *y = b;
    if (x->score > y->score)
        return -1;
    if (x->score < y->score)
        return 1;
    return strcmp(x->name, y->name);
}

/* See shardctl.h. */
as_err shardctl_engine_resync(shardctl_engine *e, const shardctl_node_info *nodes, size_t n,
                              uint64_t epoch)
{
    /* From scratch: forget everything, then score, sort and select. */
    for (size_t i = 0; i < e->nnodes; i++) {
        free(e->nodes[i].name);
        free(e->nodes[i].score);
    }
    e->nnodes = e->nfree = e->live = 0;
    table_free(&e->map);
    for (size_t s = 0; s < e->ns; s++) {
        e->s[s].n = 0;
        e->s[s].members = 0;
        e->s[s].version++;
    }
    e->unfit = e->capped = 0;
    e->resyncs++;
    as_err err = AS_OK;
    sort_ctx_ent *tmp = calloc(n ? n : 1, sizeof *tmp);
    if (!tmp)
        return AS_ENOMEM;
    for (size_t k = 0; k < n; k++) {
        if (!nodes[k].name || !*nodes[k].name || map_find(e, nodes[k].name) >= 0)
            continue;
        uint32_t i;
        if ((err = node_slot(e, nodes[k].name, &i)))
            goto done;
        e->nodes[i].tag = nodes[k].tag;
        e->nodes[i].epoch = epoch;
    }
    for (size_t s = 0; s < e->ns; s++) {
        size_t m = 0;
        for (size_t k = 0; k < n; k++) {
            long i = nodes[k].name ? map_find(e, nodes[k].name) : -1;
            if (i < 0)
                continue;
            double sc;
            if (!eval_sched(&e->cfg->sched[s], &nodes[k], &sc))
                continue;
            enode *nd = &e->nodes[i];
            if ((nd->elig >> s) & 1)
                continue; /* duplicate name in the input */
            nd->elig |= 1u << s;
            nd->score[s] = sc;
            tmp[m++] = (sort_ctx_ent){sc, (uint32_t)i, nd->name};
        }
        qsort(tmp, m, sizeof *tmp, sort_ent_cmp);
        esched *es = &e->s[s];
        if (es->cap < m) {
            eent *v = realloc(es->v, m * sizeof *v);
            if (!v) {
                err = AS_ENOMEM;
                goto done;
            }
            es->v = v;
            es->cap = m;
        }
        for (size_t k = 0; k < m; k++)
            es->v[k] = (eent){tmp[k].score, tmp[k].node};
        es->n = m;
    }
    e->order_valid = false;
    e->stale = false;
    if ((err = relayout(e)))
        goto done;
    if (e->unfit) {
        /* One line per resync (they recur every shardSyncPeriod); node
         * events log each transition. */
        char sample[512] = "";
        size_t used = 0, shown = 0;
        for (size_t i = 0; i < e->nnodes && shown < 5; i++)
            if (e->nodes[i].live && !e->nodes[i].elig) {
                int w = snprintf(sample + used, sizeof sample - used, "%s%s", shown ? "," : "",
                                 e->nodes[i].name);
                if (w < 0 || (size_t)w >= sizeof sample - used)
                    break;
                used += (size_t)w;
                shown++;
            }
        log_warn("msg=\"nodes fit no scheduler's shard filter\" count=%zu sample=%s", e->unfit,
                 sample);
    }
done:
    free(tmp);
    return err;
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* See shardctl.h. */
as_err shardctl_engine_members(shardctl_engine *e, size_t s, const char ***names, size_t *n,
                               uint64_t *version)
{
    *names = NULL;
    *n = 0;
    if (s >= e->ns)
        return AS_EINVAL;
    settle(e);
    const char **v = calloc(e->s[s].members + 1, sizeof *v);
    if (!v)
        return AS_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < e->nnodes && k < e->s[s].members; i++)
        if (e->nodes[i].live && e->nodes[i].owner == (int)s)
            v[k++] = e->nodes[i].name;
    qsort(v, k, sizeof *v, cmp_cstr);
    *names = v;
    *n = k;
    if (version)
        *version = e->s[s].version;
    return AS_OK;
}

/* See shardctl.h. */
uint64_t shardctl_engine_version(shardctl_engine *e, size_t i)
{
    settle(e);
    return i < e->ns ? e->s[i].version : 0;
}

/* See shardctl.h. */
int shardctl_engine_owner(shardctl_engine *e, const char *name)
{
    settle(e);
    long i = map_find(e, name);
    return i < 0 ? -1 : e->nodes[i].owner;
}

/* See shardctl.h. */
void shardctl_engine_get_stats(shardctl_engine *e, shardctl_engine_stats *out)
{
    settle(e);
    memset(out, 0, sizeof *out);
    out->nodes = e->live;
    out->unfit = e->unfit;
    out->capped = e->capped;
    for (size_t s = 0; s < e->ns; s++) {
        out->members[s] = e->s[s].members;
        out->below_min[s] = (long)e->s[s].members < e->cfg->sched[s].min_nodes;
    }
    out->fast_updates = e->fast_updates;
    out->passes = e->passes;
    out->resyncs = e->resyncs;
}

static int cmp_cstr_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* See shardctl.h. */
bool shardctl_needs_write(const char *const *cur, size_t ncur, const char *const *next, size_t n)
{
    if (!cur || ncur != n)
        return true;
    const char **v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return true;
    if (n)
        memcpy(v, cur, n * sizeof *v);
    qsort(v, n, sizeof *v, cmp_cstr_ptr);
    size_t threshold = n / 10 > 1 ? n / 10 : 1, fresh = 0;
    for (size_t i = 0; i < n && fresh < threshold; i++)
        if (!bsearch(&next[i], v, n, sizeof *v, cmp_cstr_ptr))
            fresh++;
    free(v);
    return fresh >= threshold;
}

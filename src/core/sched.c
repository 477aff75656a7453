/*
 * sched.c - one scheduling decision over the cache, in place.
 */
#include "agentsched/core/sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* See sched.h. */
void sched_result_init(sched_result *r)
{
    /* Every field but the entries of cand[] and reasons[] (6 KB together,
     * which every extender call would clear twice): they are read up to
     * ncand and nreasons only. */
    r->per_name = NULL;
    r->score = NULL;
    r->reason_of = NULL;
    r->nnames = 0;
    r->evaluated = 0;
    r->feasible = 0;
    r->ncand = 0;
    r->nreasons = 0;
    r->shard_revision = 0;
}

/* See sched.h. */
void sched_result_free(sched_result *r)
{
    if (!r)
        return;
    free(r->per_name);
    free(r->score);
    free(r->reason_of);
    r->per_name = NULL;
    r->score = NULL;
    r->reason_of = NULL;
}

/* A kept candidate during the scan: the name is whatever the caller gave
 * (names path) or the spec's, with its length, so comparisons never chase
 * the spec; the spec name is filled in once at the end. */
typedef struct topk_ent {
    sched_candidate c;
    const cache_node *node;
    size_t len;
} topk_ent;

typedef struct topk {
    topk_ent e[SCHED_MAX_K];
    uint32_t n, k;
    /* A score below bar cannot enter: -inf until full, then the worst
     * kept score (+inf when k == 0), so most offers stop at one compare. */
    double bar;
    /* The worst kept name's first 8 bytes, big-endian, zero-padded: a tie
     * at the bar whose name's first 8 bytes order after it loses to the
     * worst without a full compare (identical nodes tie all the time). */
    uint64_t bar_key;
    bool unique; /* each node is offered once: no repeats to look for */
} topk;

/* be_key is s's first 8 bytes as a big-endian number (memcmp order),
 * zero-padded when len < 8. */
static inline uint64_t be_key(const char *s, size_t len)
{
    uint64_t w = 0;
    if (len >= 8)
        memcpy(&w, s, 8);
    else
        memcpy(&w, s, len);
    return __builtin_bswap64(w);
}

static void topk_init(topk *t, uint32_t k, bool unique)
{
    t->n = 0;
    t->k = k;
    t->bar = k ? -INFINITY : INFINITY;
    t->unique = unique;
}

/* topk_rank orders a (score, name) against a kept entry: < 0 when it ranks
 * first (a higher score, or the same score and the smaller name). */
static inline int topk_rank(double s, const char *name, size_t len, const topk_ent *e)
{
    if (s != e->c.score)
        return s > e->c.score ? -1 : 1;
    return sched_name_cmp(name, len, e->c.name, e->len);
}

/* topk_insert is topk_offer past the bar: the place is found by binary
 * search (ties on score are common, so each step may compare names) and
 * the entries after it move down by one. */
static void topk_insert(topk *t, const cache_node *node, const char *name, size_t len,
                        uint64_t version, double score)
{
    if (!t->k)
        return;
    if (!name) {
        name = node->spec->name;
        /* the hot copy; a node built by hand has none */
        len = node->name_len ? node->name_len : strlen(name);
    }
    uint32_t lo = 0, hi = t->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (topk_rank(score, name, len, &t->e[mid]) < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    if (lo == t->k)
        return; /* full, and not better than the worst */
    /* a name listed twice by the caller is one candidate */
    for (uint32_t j = 0; !t->unique && j < t->n; j++)
        if (t->e[j].node == node)
            return;
    uint32_t end = t->n < t->k ? t->n++ : t->n - 1; /* the worst drops out when full */
    memmove(&t->e[lo + 1], &t->e[lo], (end - lo) * sizeof t->e[0]);
    t->e[lo] = (topk_ent){{node->slot, node->id, version, score, name}, node, len};
    if (t->n == t->k) {
        t->bar = t->e[t->n - 1].c.score;
        t->bar_key = be_key(t->e[t->n - 1].c.name, t->e[t->n - 1].len);
    }
}

/* topk_offer offers node with its score; name/len is the node's name as
 * the caller spelled it, or NULL to use the spec's (looked up only when a
 * tie needs it). Inline: it runs for every feasible node and nearly always
 * rejects at the bar. */
static inline void topk_offer(topk *t, const cache_node *node, const char *name, size_t len,
                              uint64_t version, double score)
{
    if (score < t->bar)
        return;
    /* at the bar the list is full; a caller's name orders against the
     * worst's by its first word when they differ there */
    if (score == t->bar && name && len >= 8 && be_key(name, 8) > t->bar_key)
        return;
    topk_insert(t, node, name, len, version, score);
}

/* Reason buckets: (code, key) where key is the resource index, or a hash of
 * the taint's key and value so equal taints on different nodes share a
 * bucket. */
static int32_t reason_key(const model_taint *t, pred_result r)
{
    if (!t)
        return r.arg;
    uint32_t h = 2166136261u;
    for (const char *s = t->key; s && *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    h = (h ^ 0xff) * 16777619u;
    for (const char *s = t->value; s && *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return (int32_t)(h & 0x7fffffff);
}

typedef struct eval_ctx {
    const model_registry *reg;
    cache_shard_mode mode;
    const sched_request *req;
    double bonus;
    sched_result *out;
    topk in, out_of_shard;
    bool split; /* soft mode, scanning all: out-of-shard only as fallback */
    size_t feasible_in;
    /* the taint of each PRED_TAINT bucket (borrowed under the read lock),
     * to tell a taint from another that hashes alike */
    const model_taint *btaint[SCHED_MAX_REASONS];
} eval_ctx;

/* add_reason counts r (node may be NULL unless r is a taint) in its bucket
 * and returns the bucket's index, or SCHED_NO_REASON when the buckets are
 * full or r's taint differs from its bucket's (two taints whose key and
 * value hash alike: counted together, but the bucket's text is not r's). */
static uint8_t add_reason(eval_ctx *x, const cache_node *node, pred_result r)
{
    sched_result *out = x->out;
    const model_taint *t = pred_taint_of(node, r);
    int32_t key = reason_key(t, r);
    for (uint32_t i = 0; i < out->nreasons; i++) {
        sched_reason_count *rc = &out->reasons[i];
        if (rc->reason.code == r.code && rc->reason.arg == key) {
            rc->count++;
            if (t && !pred_taint_same(x->btaint[i], t))
                return SCHED_NO_REASON;
            return (uint8_t)i;
        }
    }
    if (out->nreasons == SCHED_MAX_REASONS)
        return SCHED_NO_REASON; /* distinct reasons beyond the cap are dropped */
    uint32_t i = out->nreasons++;
    sched_reason_count *rc = &out->reasons[i];
    rc->reason = (pred_result){r.code, key};
    rc->count = 1;
    x->btaint[i] = t;
    pred_reason(x->reg, node, x->req->pod, r, rc->text, sizeof rc->text);
    return (uint8_t)i;
}

static int cmp_reason(const void *a, const void *b)
{
    const sched_reason_count *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return strcmp(x->text, y->text);
}

/* offer_fit records a node known to fit with score s (soft-shard bonus
 * included) and the bind version its evaluation saw. */
static inline void offer_fit(eval_ctx *x, const cache_node *node, const char *name, size_t len,
                             uint64_t version, double s)
{
    x->out->feasible++;
    bool in = x->mode == CACHE_SHARD_NONE || cache_node_in_shard(node);
    if (x->split && !in) {
        topk_offer(&x->out_of_shard, node, name, len, version, s);
    } else {
        x->feasible_in++;
        topk_offer(&x->in, node, name, len, version, s);
    }
}

/* kept records a node the policy keeps from the pod (score_keeps) as a
 * predicate failure; returns -1. Out of line: eval_node is the scan's
 * inner loop and this is its rare case. */
static __attribute__((noinline, cold)) double kept(eval_ctx *x, const cache_node *node,
                                                   pred_result *res, uint8_t *why)
{
    if (res)
        *res = (pred_result){PRED_KEPT, 0};
    uint8_t b = add_reason(x, node, (pred_result){PRED_KEPT, 0});
    if (why)
        *why = b;
    return -1;
}

/* eval_node evaluates one node; returns its score or -1 when infeasible. */
static inline double eval_node(eval_ctx *x, const cache_node *node, const char *name, size_t len,
                               pred_result *res, uint8_t *why)
{
    const sched_request *req = x->req;
    x->out->evaluated++;
    /* Acquire the version before any usage read: the seqlock contract. */
    uint64_t version = cache_node_bind_version(node);
    if (!req->skip_filter) {
        pred_result r = pred_check(x->reg, x->mode, req->pod, node);
        if (res)
            *res = r;
        if (r.code != PRED_OK) {
            uint8_t b = add_reason(x, node, r);
            if (why)
                *why = b;
            return -1;
        }
    } else if (res) {
        *res = (pred_result){PRED_OK, 0};
    }
    double s = score_node(req->policy, req->pod, node);
    if (__builtin_expect(s < 0, 0)) {
        if (req->skip_filter)
            s = 0; /* filtered upstream: a kept node only scores nothing */
        else
            return kept(x, node, res, why);
    }
    if (x->mode == CACHE_SHARD_SOFT && cache_node_in_shard(node))
        s += x->bonus;
    offer_fit(x, node, name, len, version, s);
    return s;
}

/* See sched.h. */
as_err sched_evaluate(cache *c, const sched_request *req, sched_result *out)
{
    sched_result_init(out);
    if (!req || !req->pod || !req->policy || (req->nnames && !req->names))
        return AS_EINVAL;
    size_t nn = req->names ? req->nnames : 0;
    if (req->names) {
        out->nnames = nn;
        /* every entry is written below */
        out->per_name = malloc((nn ? nn : 1) * sizeof *out->per_name);
        out->reason_of = malloc(nn ? nn : 1);
        if (!out->per_name || !out->reason_of) {
            sched_result_free(out);
            return AS_ENOMEM;
        }
        if (req->score_all) {
            out->score = malloc((nn ? nn : 1) * sizeof *out->score);
            if (!out->score) {
                sched_result_free(out);
                return AS_ENOMEM;
            }
        }
    }

    eval_ctx x;
    memset(&x, 0, sizeof x);
    x.reg = cache_registry(c);
    x.req = req;
    x.out = out;
    uint32_t k = req->k > SCHED_MAX_K ? SCHED_MAX_K : req->k;
    /* a full scan visits each node once; named nodes may repeat unless
     * the caller says otherwise */
    bool unique = !req->names || req->names_unique;
    topk_init(&x.in, k, unique);
    topk_init(&x.out_of_shard, k, unique);

    cache_read_lock(c);
    if (req->oracle && req->oracle->prepare) {
        as_err err = req->oracle->prepare(req->oracle->arg);
        if (err) {
            cache_read_unlock(c);
            sched_result_free(out);
            return err;
        }
    }
    x.mode = cache_get_shard_mode(c);
    x.bonus = x.mode == CACHE_SHARD_SOFT ? score_policy_soft_shard_bonus(req->policy) : 0;
    x.split = x.mode == CACHE_SHARD_SOFT && !req->names;
    out->shard_revision = cache_shard_revision(c);
    if (req->names) {
        /* Names are resolved a block at a time so the cache misses of a
         * block overlap (cache_node_find_n). */
        enum { BLOCK = SCHED_ORACLE_BLOCK };
        cache_node *bn[BLOCK];
        double osc[BLOCK];
        uint64_t over[BLOCK];
        uint8_t ofit[BLOCK];
        const sched_oracle *oracle = req->skip_filter ? NULL : req->oracle;
        for (size_t i = 0; i < nn; i += BLOCK) {
            size_t k = nn - i < BLOCK ? nn - i : BLOCK;
            const sched_name *bs = req->names + i;
            cache_node_find_n(c, bs, k, bn);
            if (oracle)
                oracle->lookup_n(oracle->arg, (const cache_node *const *)bn, k, osc, over, ofit);
            for (size_t j = 0; j < k; j++) {
                const cache_node *node = bn[j];
                size_t at = i + j;
                double s = -1;
                out->reason_of[at] = SCHED_NO_REASON;
                if (!node) {
                    out->per_name[at] = (pred_result){PRED_NOT_FOUND, 0};
                    out->reason_of[at] = add_reason(&x, NULL, out->per_name[at]);
                } else if (oracle && ofit[j]) {
                    out->evaluated++;
                    out->per_name[at] = (pred_result){PRED_OK, 0};
                    s = osc[j];
                    offer_fit(&x, node, bs[j].s, bs[j].len, over[j], s);
                } else {
                    s = eval_node(&x, node, bs[j].s, bs[j].len, &out->per_name[at],
                                  &out->reason_of[at]);
                }
                if (out->score)
                    out->score[at] = s;
            }
        }
    } else {
        size_t n = cache_node_count(c);
        size_t i = n ? req->start % n : 0;
        for (size_t j = 0; j < n; j++) {
            eval_node(&x, cache_node_at(c, i), NULL, 0, NULL, NULL);
            if (req->max_feasible && x.feasible_in >= req->max_feasible)
                break;
            if (++i == n)
                i = 0;
        }
    }
    const topk *best = x.split && x.feasible_in == 0 ? &x.out_of_shard : &x.in;
    /* Candidate names are the specs' (NUL-terminated, sched.h). */
    for (uint32_t i = 0; i < best->n; i++) {
        out->cand[i] = best->e[i].c;
        out->cand[i].name = best->e[i].node->spec->name;
    }
    out->ncand = best->n;
    cache_read_unlock(c);

    /* Buckets are sorted by count; reason_of follows them to their new
     * places ((code, arg) is unique among buckets). */
    pred_result was[SCHED_MAX_REASONS];
    for (uint32_t i = 0; i < out->nreasons; i++)
        was[i] = out->reasons[i].reason;
    qsort(out->reasons, out->nreasons, sizeof out->reasons[0], cmp_reason);
    if (out->reason_of && out->nreasons > 1) {
        uint8_t to[SCHED_MAX_REASONS];
        for (uint32_t i = 0; i < out->nreasons; i++)
            for (uint32_t j = 0; j < out->nreasons; j++)
                if (out->reasons[j].reason.code == was[i].code &&
                    out->reasons[j].reason.arg == was[i].arg)
                    to[i] = (uint8_t)j;
        for (size_t i = 0; i < nn; i++)
            if (out->reason_of[i] != SCHED_NO_REASON)
                out->reason_of[i] = to[out->reason_of[i]];
    }
    return AS_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* See sched.h. */
const char *sched_format_unschedulable(const sched_result *r, size_t total_nodes, char *out,
                                       size_t len)
{
    if (!out || !len)
        return out;
    /* Upstream FitError.Error(): "0/N nodes are available:" then the
     * "<count> <reason>" strings sorted as strings, joined by ", ", then ".". */
    char items[SCHED_MAX_REASONS][176];
    const char *ptrs[SCHED_MAX_REASONS];
    uint32_t n = r->nreasons > SCHED_MAX_REASONS ? SCHED_MAX_REASONS : r->nreasons;
    for (uint32_t i = 0; i < n; i++) {
        snprintf(items[i], sizeof items[i], "%u %s", r->reasons[i].count, r->reasons[i].text);
        ptrs[i] = items[i];
    }
    qsort(ptrs, n, sizeof ptrs[0], cmp_str);
    size_t off = 0;
    int w = snprintf(out, len, "0/%zu nodes are available:", total_nodes);
    off = w < 0 ? 0 : (size_t)w;
    for (uint32_t i = 0; i < n && off < len; i++) {
        w = snprintf(out + off, len - off, "%s%s", i ? ", " : " ", ptrs[i]);
        off += w < 0 ? 0 : (size_t)w;
    }
    if (n && off < len)
        snprintf(out + off, len - off, ".");
    return out;
}

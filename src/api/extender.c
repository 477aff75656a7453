/*
 * extender.c - the kube-scheduler extender verbs: filter, prioritize, bind,
 * preempt. The wire contract (bodies, status codes, decisions) is written
 * down in extender.h.
 */
#include "agentsched/api/extender.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/api/extargs.h"
#include "agentsched/api/extmemo.h"
#include "agentsched/base/clock.h"
#include "agentsched/base/log.h"
#include "agentsched/core/binder.h"
#include "agentsched/core/cache.h"
#include "agentsched/core/context.h"
#include "agentsched/core/eqcache.h"
#include "agentsched/core/gpu.h"
#include "agentsched/core/pred.h"
#include "agentsched/core/sched.h"
#include "agentsched/core/score.h"
#include "agentsched/model/labels.h"
#include "agentsched/model/node.h"
#include "agentsched/model/pod.h"
#include "agentsched/model/registry.h"
#include "agentsched/model/skip.h"
#include "agentsched/model/specmemo.h"

/* The bind verb's refusal rules (extender.h BIND), one counter each. */
typedef enum bind_rule {
    RULE_NOT_FILTERED = 0,
    RULE_SCHEDULER_NAME,
    RULE_UID,
    RULE_COUNT,
} bind_rule;

static const char *const bind_rule_names[RULE_COUNT] = {"not_filtered", "scheduler_name", "uid"};

/* Pods of schedulerNames agentsched does not serve that it filtered
 * lately: never noted, remembered only so that a bind for one is refused
 * under its own rule with its schedulerName in the answer. */
#define UNSERVED_RING 256

typedef struct unserved {
    char uid[128];
    char sched[128];
} unserved;

struct extender {
    core *core;            /* borrowed */
    extmemo *memo;         /* filter -> prioritize */
    model_specmemo *specs; /* decoded Pod specs by their text */
    metrics_counter *refused[RULE_COUNT];
    pthread_mutex_t unserved_mu;
    unserved ring[UNSERVED_RING];
    size_t ring_next;
};

static void unserved_put(extender *x, const char *uid, const char *sched)
{
    pthread_mutex_lock(&x->unserved_mu);
    unserved *u = &x->ring[x->ring_next++ % UNSERVED_RING];
    snprintf(u->uid, sizeof u->uid, "%s", uid);
    snprintf(u->sched, sizeof u->sched, "%s", sched ? sched : "");
    pthread_mutex_unlock(&x->unserved_mu);
}

/* unserved_get copies the schedulerName noted for uid; false if none. */
static bool unserved_get(extender *x, const char *uid, char *sched, size_t len)
{
    bool found = false;
    pthread_mutex_lock(&x->unserved_mu);
    for (size_t i = 0; i < UNSERVED_RING && !found; i++)
        if (x->ring[i].uid[0] && strcmp(x->ring[i].uid, uid) == 0) {
            snprintf(sched, len, "%s", x->ring[i].sched);
            found = true;
        }
    pthread_mutex_unlock(&x->unserved_mu);
    return found;
}

/* ------------------------------------------------------------------ */
/* Replies                                                             */
/* ------------------------------------------------------------------ */

/* reply_error writes the 4xx/5xx body of extender.h; with_error adds the
 * protocol's own "Error" field (filter and bind results have one). */
static void reply_error(http_response *resp, int status, bool with_error, const as_diag *d,
                        as_err err)
{
    const char *msg = http_error_begin(resp, status, d, err);
    buf *o = &resp->body;
    if (with_error) {
        buf_puts(o, ",\"Error\":");
        buf_json_cstr(o, msg);
    }
    buf_puts(o, "}");
}

static void reply_ok(http_response *resp)
{
    resp->status = 200;
    resp->content_type = "application/json";
}

static double seconds_since(uint64_t t0)
{
    return (double)(clock_mono_ns() - t0) / 1e9;
}

/* pod_err puts the Pod's decode error err under the field "Pod" in d,
 * with a message when the decoder left none; err. */
static as_err pod_err(as_err err, as_diag *d)
{
    if (err) {
        as_diag_prefix_field(d, "Pod");
        if (!d->msg[0])
            as_diag_set(d, err, d->field, "Pod could not be decoded: %s", as_strerror(err));
    }
    return err;
}

/* decode_pod turns the Pod DOM into a model pod; diag fields start "Pod". */
static as_err decode_pod(core *co, const json_t *pod_json, model_pod **out, as_diag *d)
{
    *out = NULL;
    if (!pod_json)
        return as_diag_set(d, AS_EINVAL, "Pod", "Pod is required: send the v1.Pod being scheduled");
    return pod_err(model_pod_from_json(&co->reg, pod_json, out, d), d);
}

/* Labels a Pod may have for its fields to be read without a DOM. */
#define POD_FIELDS_MAX_LABELS 64

/*
 * decode_args_pod builds a's Pod (validated, not yet parsed) into a model
 * pod. Agent pods of one template share their spec's text: a spec decoded
 * before under the same registry generation is reused, and only the rest
 * of the Pod is built and decoded (model_pod_from_json_spec gives what
 * model_pod_from_json would). Sandboxes that each carry their own session
 * in what the pod model never reads (env, args, probes, volumes: the Pod
 * skip rules) share the spec's projection through those rules
 * (json_project), the second key tried. A miss decodes the spec once,
 * builds the Pod on it and remembers it under both (a spec that does not
 * decode alone is decoded with the whole Pod, for its error). p: the
 * request pool (the projection).
 */
static as_err decode_args_pod(extender *x, pool *p, extargs_args *a, model_pod **out, as_diag *d)
{
    core *co = x->core;
    *out = NULL;
    extmemo *m = x->memo;
    const json_skip *rules = model_skip_pod();
    if (!x->specs || !a->pod_spec_raw) {
        as_err err = extargs_parse_pod(a, rules, d);
        return err ? err : decode_pod(co, a->pod, out, d);
    }
    int gen = model_registry_count(&co->reg);
    /* a spec the projection does not follow is decoded with the whole
     * Pod, which reports what is wrong with it */
    model_specmemo_keys mk;
    model_pod_spec *spec =
        model_specmemo_find(x->specs, gen, a->pod_spec_raw, a->pod_spec_len, rules,
                            pool_alloc_raw(p, a->pod_spec_len), a->pod_spec_len, &mk);
    as_err err;
    if (spec) {
        metrics_inc(co->m.spec_memo_hits);
        /* The spec is known: kind, metadata and status are read off the
         * span, or, when they are not the plain case, from the DOM. */
        model_pod_fields f;
        model_span keys[POD_FIELDS_MAX_LABELS], values[POD_FIELDS_MAX_LABELS];
        if (extargs_pod_fields(a, &f, keys, values, POD_FIELDS_MAX_LABELS) &&
            model_pod_from_fields(&co->reg, &f, spec, out) == AS_OK) {
            model_pod_spec_unref(spec);
            return AS_OK;
        }
        err = extargs_parse_pod(a, extmemo_spec_skip(m), d);
        if (!err)
            err = pod_err(model_pod_from_json_spec(&co->reg, a->pod, spec, out, d), d);
        model_pod_spec_unref(spec);
        return err;
    }
    metrics_inc(co->m.spec_memo_misses);
    if ((err = extargs_parse_pod(a, rules, d)))
        return err;
    /* The spec is decoded once, for the memo and the pod alike; one that
     * does not decode alone is decoded with the whole Pod, which says
     * what is wrong with it. */
    as_diag scratch;
    if (model_pod_spec_from_json(&co->reg, json_object_get(a->pod, "spec"), &spec, &scratch) !=
        AS_OK)
        return decode_pod(co, a->pod, out, d);
    if (!(err = pod_err(model_pod_from_json_spec(&co->reg, a->pod, spec, out, d), d)))
        model_specmemo_put(x->specs, &mk, spec);
    model_pod_spec_unref(spec);
    return err;
}

/* ------------------------------------------------------------------ */
/* Reasons                                                             */
/* ------------------------------------------------------------------ */

/*
 * A response writer for the per-node parts of filter and prioritize: bytes
 * go into a small chunk on the stack and reach the (capped) response buf
 * one buf_append per chunk, instead of a buf call per token. JSON strings
 * are escaped exactly as buf_json_str does; anything too big for a chunk
 * goes to buf directly, so the output never depends on the chunk size.
 */
#define WR_CHUNK 4096
typedef struct wr {
    buf *o;
    size_t n;
    char c[WR_CHUNK];
} wr;

static void wr_init(wr *w, buf *o)
{
    w->o = o;
    w->n = 0;
}

static void wr_flush(wr *w)
{
    if (w->n)
        buf_append(w->o, w->c, w->n);
    w->n = 0;
}

static inline void wr_raw(wr *w, const char *s, size_t n)
{
    if (n > WR_CHUNK - w->n) {
        wr_flush(w);
        if (n > WR_CHUNK) {
            buf_append(w->o, s, n);
            return;
        }
    }
    memcpy(w->c + w->n, s, n);
    w->n += n;
}

#define WR_LIT(w, lit) wr_raw((w), (lit), sizeof(lit) - 1)

static inline void wr_str(wr *w, const char *s, size_t n)
{
    size_t worst = n * 6 + 2;
    if (worst > WR_CHUNK - w->n) {
        wr_flush(w);
        if (worst > WR_CHUNK) {
            buf_json_str(w->o, s, n);
            return;
        }
    }
    w->n = (size_t)(buf_json_quote(w->c + w->n, s, n) - w->c);
}

/*
 * Reason texts depend only on (code, arg), and for taints on the taint's
 * key and value, so each distinct reason is rendered and JSON-escaped once
 * per request; the memo lives under the read lock (taint strings are
 * borrowed from the first node's spec).
 */
#define REASON_MEMO 16
typedef struct reason_memo {
    pred_result r[REASON_MEMO];
    const model_taint *taint[REASON_MEMO]; /* PRED_TAINT entries */
    const char *json[REASON_MEMO];         /* quoted, escaped; request pool */
    size_t json_len[REASON_MEMO];
    int n;
} reason_memo;

/* reason_json returns the quoted JSON text of r for node (may be NULL
 * unless r is a taint); falls back to rendering into scratch (escaped
 * into escaped, 160 * 6 + 2 bytes) when the memo is full or the pool is.
 * Call under the read lock. */
static const char *reason_json(reason_memo *m, pool *p, const model_registry *reg,
                               const cache_node *node, const model_pod *pod, pred_result r,
                               size_t *len, char *escaped)
{
    const model_taint *t = pred_taint_of(node, r);
    for (int i = 0; i < m->n; i++) {
        if (m->r[i].code != r.code)
            continue;
        if (r.code == PRED_TAINT ? pred_taint_same(m->taint[i], t) : m->r[i].arg == r.arg) {
            *len = m->json_len[i];
            return m->json[i];
        }
    }
    char text[160];
    pred_reason(reg, node, pod, r, text, sizeof text);
    size_t tl = strlen(text);
    char *out = m->n < REASON_MEMO ? pool_alloc(p, tl * 6 + 2) : NULL;
    char *o = out ? out : escaped;
    *len = (size_t)(buf_json_quote(o, text, tl) - o);
    if (out) {
        m->r[m->n] = r;
        m->taint[m->n] = t;
        m->json[m->n] = out;
        m->json_len[m->n++] = *len;
    }
    return o;
}

/* ------------------------------------------------------------------ */
/* filter / prioritize                                                 */
/* ------------------------------------------------------------------ */

typedef enum verb { VERB_FILTER, VERB_PRIORITIZE } verb;

typedef struct eval {
    const char *body; /* the request's, which the names may point into */
    size_t body_len;
    extargs_args a;
    sched_name *names; /* evaluated set */
    size_t n;
    size_t *item_index;
    model_pod *pod;
    score_policy *policy;
    const uint8_t *cut; /* filter: cut[i] set for a feasible name left out
                           by the policy's shortlist; NULL: none is */
    sched_result r;     /* last: handle_eval zeroes what comes before */
} eval;

/* answered: names[i] goes into the filter's NodeNames / Nodes. */
static inline bool answered(const eval *e, size_t i)
{
    return e->r.per_name[i].code == PRED_OK && !(e->cut && e->cut[i]);
}

/* ranks_before: name i outranks name j: a higher score, or the same score
 * and the name sched.h's candidates would put first. */
static bool ranks_before(const eval *e, size_t i, size_t j)
{
    double si = e->r.score[i], sj = e->r.score[j];
    if (si != sj)
        return si > sj;
    const sched_name *a = &e->names[i], *b = &e->names[j];
    return sched_name_cmp(a->s, a->len, b->s, b->len) < 0;
}

/*
 * shortlist sets e->cut when the policy's extender.shortlist is below the
 * number of feasible names: every feasible name but the `limit` best is
 * cut. The kept ones stay in request order. Without room in the pool the
 * answer lists every feasible node, which is the answer without a
 * shortlist, so nothing is lost but the saving.
 */
static void shortlist(eval *e, pool *p, uint32_t limit)
{
    if (!limit || !e->r.score || !e->r.per_name || e->r.feasible <= limit)
        return;
    size_t *top = pool_alloc_raw(p, limit * sizeof *top);
    uint8_t *cut = pool_alloc_raw(p, e->n);
    if (!top || !cut)
        return;
    /* top[0..nt) best first; a name that does not beat the last kept one
     * costs one compare, the common case once the list is full. */
    size_t nt = 0;
    for (size_t i = 0; i < e->n; i++) {
        if (e->r.per_name[i].code != PRED_OK)
            continue;
        if (nt == limit && !ranks_before(e, i, top[nt - 1]))
            continue;
        size_t at = nt < limit ? nt++ : nt - 1;
        while (at > 0 && ranks_before(e, i, top[at - 1])) {
            top[at] = top[at - 1];
            at--;
        }
        top[at] = i;
    }
    for (size_t i = 0; i < e->n; i++)
        cut[i] = e->r.per_name[i].code == PRED_OK;
    for (size_t t = 0; t < nt; t++)
        cut[top[t]] = 0;
    e->cut = cut;
}

/* in_body: nm points into the request body; such a name is the text
 * between its quotes and had no escapes (extargs.h), so the quoted span
 * can be copied as it is. */
static inline bool in_body(const eval *e, const sched_name *nm)
{
    uintptr_t p = (uintptr_t)nm->s, b = (uintptr_t)e->body;
    return p > b && p + nm->len < b + e->body_len;
}

/* wr_name writes a node name as a JSON string. */
static inline void wr_name(wr *w, const eval *e, const sched_name *nm)
{
    if (in_body(e, nm))
        wr_raw(w, nm->s - 1, nm->len + 2);
    else
        wr_str(w, nm->s, nm->len);
}

/* write_name_list writes the answered names as a JSON array. Answered
 * names that sit next to each other in the body's NodeNames ("a","b":
 * quotes and one comma apart) are copied as one span: most of a filter's
 * answer is runs of fitting nodes, a copy per run instead of per name. */
static void write_name_list(wr *w, const eval *e)
{
    const sched_name *names = e->names;
    size_t n = e->a.nnames;
    const char *run = NULL, *run_end = NULL; /* [run, run_end): quoted names */
    bool first = true;
    WR_LIT(w, "[");
    for (size_t i = 0; i < n; i++) {
        if (!answered(e, i))
            continue;
        const sched_name *nm = &names[i];
        bool body = in_body(e, nm);
        if (body && run && nm->s - 1 == run_end + 1 && *run_end == ',') {
            run_end = nm->s + nm->len + 1;
            continue;
        }
        if (run)
            wr_raw(w, run, (size_t)(run_end - run));
        run = NULL;
        if (!first)
            WR_LIT(w, ",");
        first = false;
        if (body) {
            run = nm->s - 1;
            run_end = nm->s + nm->len + 1;
        } else {
            wr_str(w, nm->s, nm->len);
        }
    }
    if (run)
        wr_raw(w, run, (size_t)(run_end - run));
    WR_LIT(w, "]");
}

/* write_filter builds the ExtenderFilterResult; takes the read lock to
 * render reasons when some node failed. */
static void write_filter(core *co, eval *e, buf *o, pool *p)
{
    /* One pass finds the failed names (usually a few of many); the
     * FailedNodes loops below visit only them. */
    const pred_result *res = e->r.per_name;
    const uint8_t *ro = e->r.reason_of;
    size_t failed = 0, unresolvable = 0;
    bool need_lock = false;
    uint32_t few[64], *fail = few;
    for (size_t i = 0; i < e->n; i++)
        if (res[i].code != PRED_OK) {
            if (failed == 64 && fail == few) {
                fail = pool_alloc_raw(p, e->n * sizeof *fail);
                if (!fail) {
                    o->err = o->err ? o->err : AS_ENOMEM;
                    return;
                }
                memcpy(fail, few, sizeof few);
            }
            fail[failed++] = (uint32_t)i;
            unresolvable += pred_unresolvable(res[i].code);
            need_lock = need_lock || !ro || ro[i] >= e->r.nreasons; /* SCHED_NO_REASON too */
        }

    wr w;
    wr_init(&w, o);
    WR_LIT(&w, "{\"Nodes\":");
    if (e->a.has_nodes) {
        WR_LIT(&w, "{\"metadata\":{},\"items\":[");
        bool first = true;
        for (size_t j = 0; j < e->a.nnodes; j++) {
            if (!answered(e, e->item_index[j]))
                continue;
            if (!first)
                WR_LIT(&w, ",");
            first = false;
            wr_raw(&w, e->a.nodes[j].raw, e->a.nodes[j].raw_len);
        }
        WR_LIT(&w, "]}");
    } else {
        WR_LIT(&w, "null");
    }
    WR_LIT(&w, ",\"NodeNames\":");
    if (e->a.has_node_names)
        write_name_list(&w, e);
    else
        WR_LIT(&w, "null");

    WR_LIT(&w, ",\"FailedNodes\":{");
    if (failed) {
        /* FailedAndUnresolvableNodes is built alongside, in its own buf. */
        buf unres;
        buf_init(&unres, o->cap);
        wr *uw = unresolvable ? malloc(sizeof *uw) : NULL;
        if (unresolvable && !uw)
            o->err = o->err ? o->err : AS_ENOMEM;
        if (uw)
            wr_init(uw, &unres);
        reason_memo memo;
        memo.n = 0;
        const model_registry *reg = &co->reg;
        bool first = true, ufirst = true;
        char escaped[160 * 6 + 2];
        /* Most failures' texts are the evaluation's reason buckets, each
         * escaped once here; the rest (a bucket of another taint that
         * hashed alike, buckets full) are rendered from their node, which
         * needs the read lock. */
        const char *bj[SCHED_MAX_REASONS] = {0};
        size_t bjl[SCHED_MAX_REASONS];
        if (need_lock)
            cache_read_lock(co->cache);
        for (size_t f = 0; f < failed; f++) {
            size_t i = fail[f];
            size_t wl;
            const char *why;
            uint8_t b = ro ? ro[i] : SCHED_NO_REASON;
            if (b < e->r.nreasons) { /* SCHED_NO_REASON is never below it */
                if (!bj[b]) {
                    const char *text = e->r.reasons[b].text;
                    size_t tl = strlen(text);
                    char *q = pool_alloc_raw(p, tl * 6 + 2);
                    bj[b] = q ? q : escaped;
                    bjl[b] = (size_t)(buf_json_quote(q ? q : escaped, text, tl) - bj[b]);
                    if (!q) {
                        why = escaped; /* no room to keep it: this once */
                        wl = bjl[b];
                        bj[b] = NULL;
                        goto have;
                    }
                }
                why = bj[b];
                wl = bjl[b];
            } else {
                const cache_node *node =
                    res[i].code == PRED_TAINT
                        ? cache_node_find(co->cache, e->names[i].s, e->names[i].len)
                        : NULL;
                why = reason_json(&memo, p, reg, node, e->pod, res[i], &wl, escaped);
            }
        have:
            if (!first)
                WR_LIT(&w, ",");
            first = false;
            wr_name(&w, e, &e->names[i]);
            WR_LIT(&w, ":");
            wr_raw(&w, why, wl);
            if (uw && pred_unresolvable(res[i].code)) {
                if (!ufirst)
                    WR_LIT(uw, ",");
                ufirst = false;
                wr_name(uw, e, &e->names[i]);
                WR_LIT(uw, ":");
                wr_raw(uw, why, wl);
            }
        }
        if (need_lock)
            cache_read_unlock(co->cache);
        WR_LIT(&w, "},\"FailedAndUnresolvableNodes\":{");
        if (uw) {
            wr_flush(uw);
            free(uw);
            if (unres.err) {
                o->err = o->err ? o->err : unres.err;
            } else {
                wr_flush(&w);
                buf_append(o, unres.data, unres.len);
            }
        }
        buf_free(&unres);
    } else {
        WR_LIT(&w, "},\"FailedAndUnresolvableNodes\":{");
    }
    WR_LIT(&w, "},\"Error\":\"\"}");
    wr_flush(&w);
}

/* The extender protocol's top score (extender/v1 MaxExtenderPriority). */
#define EXT_MAX_PRIORITY 10

/* ext_scores maps the evaluation's scores to the extender's 0..10 (0 for
 * nodes that do not fit or are unknown) into out[0..e->n). bonus is the
 * soft-shard bonus sched added to the nodes in the shard (0 outside soft
 * mode).
 *
 * kube-scheduler takes an extender's Score as is (no clamp, no configurable
 * range): score * weight * MaxNodeScore / MaxExtenderPriority (10). Every
 * step here scales instead of clipping, so that nodes agentsched tells
 * apart stay apart up to the 11 levels the protocol has: the scores, up to
 * 100 + bonus, are compressed onto [0,100] before the policy's mapping
 * (which clips above its scoreMax, and would tie every in-shard node
 * scoring 100 - bonus or more), and a policy's maxScore above 10 is scaled
 * down to 10 (clipping would tie every node in its upper part). */
static void ext_scores(const eval *e, const score_policy *policy, double bonus, int8_t *out)
{
    if (!e->r.score) {
        memset(out, 0, e->n);
        return;
    }
    /* nodes that do not fit or are unknown score -1 (sched.h): 0 here */
    double shrink = bonus > 0 ? 100.0 / (100.0 + bonus) : 1.0;
    if (shrink == 1.0) {
        score_to_extender_n(policy, e->r.score, e->n, out);
    } else {
        double tmp[256];
        for (size_t i = 0; i < e->n; i += sizeof tmp / sizeof tmp[0]) {
            size_t k =
                e->n - i < sizeof tmp / sizeof tmp[0] ? e->n - i : sizeof tmp / sizeof tmp[0];
            for (size_t j = 0; j < k; j++) {
                double x = e->r.score[i + j];
                tmp[j] = x < 0 ? x : x * shrink;
            }
            score_to_extender_n(policy, tmp, k, out + i);
        }
    }
    /* the policy's maxScore: what a top score maps to (scoreMax <= 100) */
    int max = score_to_extender(policy, 100.0);
    if (max <= EXT_MAX_PRIORITY)
        return;
    for (size_t i = 0; i < e->n; i++)
        out[i] = (int8_t)((out[i] * EXT_MAX_PRIORITY + max / 2) / max);
}

static void write_prioritize(const eval *e, buf *o, const int8_t *scores)
{
    wr w;
    wr_init(&w, o);
    WR_LIT(&w, "[");
    for (size_t i = 0; i < e->n; i++) {
        int score = scores[i];
        if (i)
            WR_LIT(&w, ",");
        WR_LIT(&w, "{\"Host\":");
        wr_name(&w, e, &e->names[i]);
        if (score == 10)
            WR_LIT(&w, ",\"Score\":10}");
        else {
            char num[] = ",\"Score\":0}";
            num[9] = (char)('0' + score);
            wr_raw(&w, num, sizeof num - 1);
        }
    }
    WR_LIT(&w, "]");
    wr_flush(&w);
}

/* answer_reset empties o for e's answer and allocates it once instead of
 * doubling up to it: a name and its punctuation (prioritize:
 * {"Host":..,"Score":n}) per node, full Nodes items echoed whole (the body
 * bounds them). A hint within the cap; an allocation failure sticks and is
 * reported as the writer's would be. */
static void answer_reset(buf *o, const eval *e)
{
    buf_reset(o);
    size_t hint = e->n * 40 + 512 + (e->a.has_nodes ? e->body_len : 0);
    if (hint < o->cap)
        (void)buf_reserve(o, hint);
}

static void handle_eval(extender *x, const http_request *req, http_response *resp, verb v)
{
    core *co = x->core;
    uint64_t t0 = clock_mono_ns();
    /* Hold the shard revision until the answer is out (shard.h gating). */
    uint64_t shard_rev = core_decision_begin(co);
    bool with_error = v == VERB_FILTER;
    as_diag d;
    memset(&d, 0, sizeof d);
    eval e;
    memset(&e, 0, offsetof(eval, r));
    sched_result_init(&e.r);
    e.body = req->body;
    e.body_len = req->body_len;

    as_err err;
    if (!core_synced(co)) {
        /* Before the first sync every node would fail as "not found" and
         * kube-scheduler would park the pod as unschedulable until some
         * cluster event; a 503 is an extender error, which it retries
         * with backoff instead. */
        err = as_diag_set(&d, AS_ETIMEOUT, NULL,
                          "agentsched's node cache has not finished its first sync with the "
                          "API server; retry shortly (see /readyz)");
        reply_error(resp, 503, with_error, &d, err);
        goto done;
    }
    /* The Pod's DOM is built only when needed: a prioritize answered from
     * the filter's memo never needs it. */
    err = extargs_decode_args_ex(req->pool, req->body, req->body_len, EXTARGS_LAZY_POD, &e.a, &d);
    if (err) {
        reply_error(resp, http_status_for_decode_err(err), with_error, &d, err);
        goto done;
    }
    if (!e.a.has_node_names && !e.a.has_nodes) {
        err = as_diag_set(&d, AS_EINVAL, "NodeNames",
                          "send the candidate nodes in NodeNames (nodeCacheCapable: true) or "
                          "Nodes (nodeCacheCapable: false)");
        reply_error(resp, 400, with_error, &d, err);
        goto done;
    }
    err = extargs_eval_names(req->pool, &e.a, &e.names, &e.n, &e.item_index);
    if (err) {
        as_diag_set(&d, err, NULL, "request too large for its memory budget");
        reply_error(resp, 413, with_error, &d, err);
        goto done;
    }
    e.policy = core_policy_get(co);
    int8_t *scores = pool_alloc(req->pool, e.n ? e.n : 1);
    if (!scores) {
        err = as_diag_set(&d, AS_ENOMEM, NULL, "request too large for its memory budget");
        reply_error(resp, 413, with_error, &d, err);
        goto done;
    }
    if (v == VERB_PRIORITIZE && e.n > 0) {
        extmemo_ent *m = extmemo_take(x->memo, &e.a, e.policy);
        bool hit = m && extmemo_scores(m, e.names, e.n, scores, req->pool);
        extmemo_recycle(x->memo, m);
        metrics_inc(hit ? co->m.memo_hits : co->m.memo_misses);
        if (hit) {
            /* The filter's binder note (same pod) stands. */
            answer_reset(&resp->body, &e);
            write_prioritize(&e, &resp->body, scores);
            if (resp->body.err) {
                err = resp->body.err;
                as_diag_set(&d, err, NULL, "the response does not fit its buffer (%s)",
                            as_strerror(err));
                reply_error(resp, 500, with_error, &d, err);
                goto done;
            }
            reply_ok(resp);
            goto done;
        }
    }
    /* kube-scheduler sends the whole Pod (env, volumes, probes, status: ~5 KB
     * for a real agent pod); the model reads a small part of it, the rest
     * is validated but never allocated. */
    if ((err = decode_args_pod(x, req->pool, &e.a, &e.pod, &d))) {
        reply_error(resp, http_status_for_decode_err(err), with_error, &d, err);
        goto done;
    }

    if (e.n > 0) {
        sched_request sr = {
            .pod = e.pod,
            .policy = e.policy,
            .names = e.names,
            .nnames = e.n,
            .k = SCHED_MAX_K,
            .names_unique = true, /* extargs_eval_names */
            /* filter scores too: its scores answer the cycle's prioritize */
            .score_all = true,
            .skip_filter = false,
        };
        /* Through the equivalence cache: nodes that fitted at their shape's
         * last evaluation, unchanged since, are not evaluated again. */
        err = co->eq ? eqcache_evaluate_names(co->eq, e.policy, &sr, &e.r, NULL)
                     : sched_evaluate(co->cache, &sr, &e.r);
        if (err) {
            as_diag_set(&d, err, NULL, "evaluation failed: %s", as_strerror(err));
            reply_error(resp, 500, with_error, &d, err);
            goto done;
        }
    }

    buf *o = &resp->body;
    answer_reset(o, &e);
    ext_scores(&e, e.policy,
               cache_get_shard_mode(co->cache) == CACHE_SHARD_SOFT
                   ? score_policy_soft_shard_bonus(e.policy)
                   : 0,
               scores);
    if (v == VERB_FILTER) {
        /* Names cut by the shortlist fit; they are left out of the answer,
         * not failed: kube-scheduler preempts only when no node is
         * feasible, and a shortlist always keeps at least one. */
        shortlist(&e, req->pool, score_policy_extender_shortlist(e.policy));
        write_filter(co, &e, o, req->pool);
        if (!o->err)
            extmemo_put(x->memo, &e.a, e.policy, e.names, scores, e.n);
    } else {
        write_prioritize(&e, o, scores);
    }
    if (o->err) {
        err = o->err;
        as_diag_set(&d, err, NULL, "the response does not fit its buffer (%s)", as_strerror(err));
        reply_error(resp, 500, with_error, &d, err);
        goto done;
    }
    reply_ok(resp);

    /* Remember what was seen for the bind verb (the later verb replaces);
     * the binder keeps the candidates' incarnations, not their names. A pod
     * of a schedulerName agentsched does not serve is answered but never
     * noted, so no bind can act on it. */
    if (!core_name_listed(co->extender_names, e.pod->scheduler_name)) {
        char tmp[600];
        unserved_put(x, model_pod_key(e.pod, tmp, sizeof tmp, NULL), e.pod->scheduler_name);
        if (log_enabled(LOG_DEBUG))
            log_debug("msg=\"extender evaluation not noted: schedulerName not served\" "
                      "pod=%s/%s scheduler_name=%s",
                      e.pod->ns, e.pod->name, e.pod->scheduler_name);
        goto done;
    }
    err = binder_note(co->binder, e.pod, e.r.cand, e.r.ncand);
    e.pod = NULL; /* the binder owns it now, even on error */
    if (err == AS_ETOOBIG)
        log_warn("msg=\"pod too large to remember for the bind verb (over a quarter of the "
                 "memo's %zu MiB); its bind will be refused and kube-scheduler retries\"",
                 (size_t)(BINDER_MEMO_DEFAULT_BYTES >> 20));
    else if (err)
        log_warn("msg=\"cannot note the extender evaluation\" err=%s", as_strerror(err));
    if (log_enabled(LOG_DEBUG))
        log_debug("msg=\"extender %s\" nodes=%zu feasible=%zu shortlist=%u",
                  v == VERB_FILTER ? "filter" : "prioritize", e.n, e.r.feasible,
                  e.cut ? score_policy_extender_shortlist(e.policy) : 0);
done:
    sched_result_free(&e.r);
    if (e.policy)
        score_policy_unref(e.policy);
    model_pod_free(e.pod);
    extargs_args_release(&e.a);
    core_decision_end(co, shard_rev);
    metrics_observe(v == VERB_FILTER ? co->m.filter_seconds : co->m.prioritize_seconds,
                    seconds_since(t0));
}

/* See extender.h. */
void extender_handle_filter(void *ctx, const http_request *req, http_response *resp)
{
    handle_eval(ctx, req, resp, VERB_FILTER);
}

/* See extender.h. */
void extender_handle_prioritize(void *ctx, const http_request *req, http_response *resp)
{
    handle_eval(ctx, req, resp, VERB_PRIORITIZE);
}

/* ------------------------------------------------------------------ */
/* bind                                                                */
/* ------------------------------------------------------------------ */

/* What the bind port needs besides the decision: the verb's arguments
 * (the Binding carries its UID precondition) and where to put the API
 * round trip's time. */
typedef struct bind_call {
    core *co;
    const extargs_binding *b;
    uint64_t api_ns;
} bind_call;

/* bind_port is the decision's bind: in live mode, the pods/binding
 * subresource through the core's API port; embedded, or for a pod already
 * in place, nothing to post. */
static as_err bind_port(void *arg, const decision *dc, as_diag *d)
{
    bind_call *bc = arg;
    /* idempotent: a retried bind whose first reply was lost; already there */
    if (!core_live(bc->co) || dc->out.how == BINDER_IDEMPOTENT)
        return AS_OK;
    const extargs_binding *b = bc->b;
    uint64_t t = clock_mono_ns();
    /* PreBind: a pod that got devices has them written on it first, with
     * its uid and the resourceVersion of the Pod noted at filter time as
     * preconditions; a conflict fails the bind (unreserved; kube-scheduler
     * retries the cycle with the pod as it is now). */
    as_err err = core_gpu_prebind(bc->co, b->pod_namespace, b->pod_name, b->pod_uid,
                                  dc->out.resource_version, b->node, dc->out.gpu_devices,
                                  dc->out.gpu_milli, d);
    if (!err)
        err = bc->co->ports.bind(bc->co->ports.arg, b->pod_namespace, b->pod_name, b->pod_uid,
                                 b->node, d);
    bc->api_ns = clock_mono_ns() - t;
    return err;
}

static void reply_bind(http_response *resp, const char *error)
{
    buf *o = &resp->body;
    buf_reset(o);
    buf_puts(o, "{\"Error\":");
    buf_json_cstr(o, error ? error : "");
    buf_puts(o, "}");
    reply_ok(resp);
}

/* bind_refuse answers a bind the authorization rules refuse: 403 with the
 * ExtenderBindingResult body (kube-scheduler treats any non-200 as a failed
 * bind and retries the cycle), counted per rule, and logged with the
 * caller's address. */
static void bind_refuse(extender *x, const http_request *req, http_response *resp,
                        const extargs_binding *b, bind_rule rule, const char *what)
{
    as_diag d;
    as_diag_set(&d, AS_EAUTH, rule == RULE_SCHEDULER_NAME ? "PodName" : "PodUID",
                "agentsched refused to bind pod %s/%s: %s", b->pod_namespace, b->pod_name, what);
    reply_error(resp, 403, true, &d, AS_EAUTH);
    metrics_inc(x->refused[rule]);
    log_warn("msg=\"bind refused\" rule=%s pod=%s/%s uid=%s node=%s caller=%s",
             bind_rule_names[rule], b->pod_namespace, b->pod_name, b->pod_uid, b->node,
             req->remote && req->remote[0] ? req->remote : "-");
}

/* What bind_authorize decided. */
typedef enum bind_verdict {
    BIND_ALLOW = 0,  /* noted and served: reserve and bind */
    BIND_IDEMPOTENT, /* already in place on that node: answer success, do nothing */
    BIND_REFUSED,    /* answered with a 403 */
} bind_verdict;

/* bind_authorize applies the rules of extender.h BIND to a decoded
 * binding whose binder key is uid. */
static bind_verdict bind_authorize(extender *x, const http_request *req, http_response *resp,
                                   const extargs_binding *b, const char *uid)
{
    core *co = x->core;
    char what[700];
    if (core_live(co) && !b->pod_uid[0]) {
        bind_refuse(x, req, resp, b, RULE_UID,
                    "PodUID is required when agentsched binds through the API server; send the "
                    "pod's metadata.uid");
        return BIND_REFUSED;
    }
    char want[600];
    snprintf(want, sizeof want, "%s/%s", b->pod_namespace[0] ? b->pod_namespace : "default",
             b->pod_name);
    char key[600], sched[256];
    bool noted = binder_noted_pod(co->binder, uid, key, sizeof key, sched, sizeof sched);
    if (!noted && unserved_get(x, uid, sched, sizeof sched)) {
        snprintf(key, sizeof key, "%s", want);
        noted = true; /* the schedulerName rule below refuses it */
    }
    if (!noted) {
        /* A successful bind drops the note; kube-scheduler retries a bind
         * whose reply was lost, and finding the pod already on that node
         * changes nothing. */
        cache_pod_info pi;
        cache_pod_lookup(co->cache, uid, &pi);
        if (pi.state != CACHE_POD_ABSENT && strcmp(pi.key, want) == 0) {
            if (strcmp(pi.node, b->node) == 0)
                return BIND_IDEMPOTENT;
            /* as the binder answers a pod bound elsewhere */
            metrics_inc(co->m.bind_conflicts);
            snprintf(what, sizeof what,
                     "agentsched refused to bind pod %.200s/%.200s to node %.200s: already on "
                     "node %.200s",
                     b->pod_namespace, b->pod_name, b->node, pi.node);
            reply_bind(resp, what);
            return BIND_REFUSED;
        }
        bind_refuse(x, req, resp, b, RULE_NOT_FILTERED,
                    "agentsched did not filter this pod (or its filter note expired, or another "
                    "replica filtered it); configure agentsched's filterVerb in the same extender "
                    "entry as its bindVerb, and let kube-scheduler retry the cycle");
        return BIND_REFUSED;
    }
    if (!core_name_listed(co->extender_names, sched)) {
        snprintf(what, sizeof what,
                 "its schedulerName %.200s is not one agentsched binds for "
                 "(--extender-scheduler-names %.300s)",
                 sched, co->extender_names);
        bind_refuse(x, req, resp, b, RULE_SCHEDULER_NAME, what);
        return BIND_REFUSED;
    }
    if (strcmp(key, want) != 0) {
        snprintf(what, sizeof what,
                 "PodUID %.100s belongs to pod %.400s, not to this one; send the pod's own "
                 "metadata.uid",
                 b->pod_uid, key);
        bind_refuse(x, req, resp, b, RULE_UID, what);
        return BIND_REFUSED;
    }
    return BIND_ALLOW;
}

/* See extender.h. */
void extender_handle_bind(void *ctx, const http_request *req, http_response *resp)
{
    extender *x = ctx;
    core *co = x->core;
    uint64_t t0 = clock_mono_ns();
    as_diag d;
    memset(&d, 0, sizeof d);
    extargs_binding b;
    bind_call bc = {co, &b, 0};
    decision_ports ports = core_decision_ports(co, bind_port, NULL, &bc);
    /* The gate is held through the reserve and the API bind (shard.h
     * gating): the binder's recheck refuses a node that left the shard,
     * and no status releasing it goes out while this bind may still land
     * on it. */
    decision dc;
    decision_begin(&dc, co->binder, &ports);
    char why[600];
    as_err err = extargs_decode_binding(req->pool, req->body, req->body_len, &b, &d);
    if (err) {
        reply_error(resp, http_status_for_decode_err(err), true, &d, err);
        goto done;
    }
    char keyuid[600];
    const char *uid = b.pod_uid;
    if (!uid[0]) {
        /* the cache and the binder key uid-less pods by namespace/name */
        snprintf(keyuid, sizeof keyuid, "%s/%s", b.pod_namespace, b.pod_name);
        uid = keyuid;
    }
    switch (bind_authorize(x, req, resp, &b, uid)) {
    case BIND_ALLOW:
        break;
    case BIND_IDEMPOTENT:
        metrics_inc(co->m.binds_idempotent);
        log_info("msg=\"bound\" pod=%s/%s node=%s how=idempotent", b.pod_namespace, b.pod_name,
                 b.node);
        reply_bind(resp, "");
        goto done;
    case BIND_REFUSED:
        goto done;
    }
    err = decision_reserve_noted(&dc, uid, b.node);
    const binder_outcome *out = &dc.out;
    switch (err) {
    case AS_OK:
        metrics_inc(out->how == BINDER_FAST        ? co->m.binds_fast
                    : out->how == BINDER_RECHECKED ? co->m.binds_rechecked
                                                   : co->m.binds_idempotent);
        if ((err = decision_bind(&dc, &d))) {
            snprintf(why, sizeof why, "agentsched could not bind pod %s/%s to node %s: %s",
                     b.pod_namespace, b.pod_name, b.node, d.msg);
            reply_bind(resp, why);
            goto done;
        }
        /* api_us: the pods/binding round trip (as the fast path logs it), most
         * of a live bind's time */
        log_info("msg=\"bound\" pod=%s/%s node=%s how=%s api_us=%llu", b.pod_namespace, b.pod_name,
                 b.node,
                 out->how == BINDER_FAST        ? "fast"
                 : out->how == BINDER_RECHECKED ? "rechecked"
                                                : "idempotent",
                 (unsigned long long)(bc.api_ns / 1000));
        reply_bind(resp, "");
        break;
    case AS_ENOTFOUND: /* the note expired since bind_authorize */
        bind_refuse(x, req, resp, &b, RULE_NOT_FILTERED,
                    "its filter note expired; let kube-scheduler retry the cycle");
        break;
    case AS_ECONFLICT:
        metrics_inc(co->m.bind_conflicts);
        snprintf(why, sizeof why, "agentsched refused to bind pod %s/%s to node %s: %s",
                 b.pod_namespace, b.pod_name, b.node, out->reason);
        log_info("msg=\"bind refused\" pod=%s/%s node=%s reason=\"%s\"", b.pod_namespace,
                 b.pod_name, b.node, out->reason);
        reply_bind(resp, why);
        break;
    default:
        as_diag_set(&d, err, NULL, "bind failed: %s", as_strerror(err));
        reply_error(resp, http_status_for_err(err) < 500 ? 500 : http_status_for_err(err), true, &d,
                    err);
        break;
    }
done:
    decision_end(&dc);
    metrics_observe(co->m.bind_seconds, seconds_since(t0));
}

/* ------------------------------------------------------------------ */
/* preempt                                                             */
/* ------------------------------------------------------------------ */

/* What we learned about one victim before taking the read lock. */
typedef struct victim {
    bool on_node;         /* the cache has it on the entry's node */
    uint32_t gpu_devices; /* devices it holds there */
    int32_t gpu_milli;    /* milli-GPU it holds on each (the cache's account) */
    model_resvec req;     /* what it adds to the node's requested (the same) */
    model_pod *pod;       /* decoded full pod (NodeNameToVictims), else NULL */
} victim;

/* can_host_after: does pod fit `node` once the victims are gone, and
 * would pol (NULL: any) not keep the node from it then (score_keeps)?
 * Called under the read lock. */
static bool can_host_after(const model_registry *reg, const score_policy *pol,
                           cache_shard_mode mode, const model_pod *pod, const cache_node *node,
                           const victim *v, size_t nv)
{
    pred_result r = pred_check_static(mode, pod, node);
    if (r.code != PRED_OK)
        return false;
    /* A private copy of the node to subtract the victims from: the fields
     * before `requested` and after `in_shard` are stable under the read
     * lock (and include any hot copies of the spec the cache keeps); the
     * atomic usage fields in between are loaded with their accessors. */
    cache_node tmp;
    memset(&tmp, 0, sizeof tmp);
    memcpy(&tmp, node, offsetof(cache_node, requested));
    size_t tail = offsetof(cache_node, in_shard) + sizeof node->in_shard;
    memcpy((char *)&tmp + tail, (const char *)node + tail, sizeof tmp - tail);
    tmp.in_shard = cache_node_in_shard(node);
    tmp.id = 0; /* not the node a score may have kept a waste for (score_node) */
    for (int i = 0; i < MODEL_MAX_RES; i++)
        tmp.requested[i] = cache_node_requested(node, i);
    for (int g = 0; g < MODEL_MAX_GPUS; g++)
        tmp.gpu_used[g] = cache_node_gpu_used(node, g);
    for (size_t k = 0; k < nv; k++) {
        if (!v[k].on_node)
            continue;
        /* A victim frees what the cache counted for it: its requests, and
         * on its own devices only its milli (a 300-milli share frees 300
         * on its device, and the preemptor still needs one device holding
         * its whole share; a whole GPU frees its device). The cache's
         * account, not the victim's spec, is what the node's usage holds,
         * and it is all a MetaVictim (a UID) offers. */
        for (uint32_t m = v[k].gpu_devices; m; m &= m - 1) {
            int g = __builtin_ctz(m);
            if (g >= MODEL_MAX_GPUS)
                break;
            int32_t freed = v[k].gpu_milli;
            tmp.gpu_used[g] = tmp.gpu_used[g] > freed ? tmp.gpu_used[g] - freed : 0;
        }
        for (int i = 0; i < MODEL_MAX_RES; i++) {
            tmp.requested[i] -= v[k].req.v[i];
            if (tmp.requested[i] < 0)
                tmp.requested[i] = 0;
        }
    }
    /* The devices the victims leave wholly free, and the milli they free,
     * count among the cluster's too (score_keeps' keepFree reads them):
     * after the evictions the cluster has them as well as what is free
     * now. Nothing here scores, so the node's GPU model keeps its counts. */
    uint64_t gpus[3];
    uint32_t freed = 0;
    uint64_t freed_milli = 0;
    for (uint32_t g = 0; g < node->ngpus; g++) {
        int32_t was = cache_node_gpu_used(node, (int)g);
        freed += was > 0 && tmp.gpu_used[g] == 0;
        freed_milli += gpu_device_free(tmp.gpu_used[g]) - gpu_device_free(was);
    }
    if (freed_milli && node->cluster_gpus) {
        gpus[0] = __atomic_load_n(&node->cluster_gpus[0], __ATOMIC_RELAXED);
        gpus[1] = __atomic_load_n(&node->cluster_gpus[1], __ATOMIC_RELAXED) + freed;
        gpus[2] = __atomic_load_n(&node->cluster_gpus[2], __ATOMIC_RELAXED) + freed_milli;
        tmp.cluster_gpus = gpus;
    }
    r = pred_check_resources(reg, pod, &tmp);
    return r.code == PRED_OK && !(pol && score_keeps(pol, pod, &tmp));
}

/* See extender.h. */
void extender_handle_preempt(void *ctx, const http_request *req, http_response *resp)
{
    extender *x = ctx;
    core *co = x->core;
    uint64_t t0 = clock_mono_ns();
    as_diag d;
    memset(&d, 0, sizeof d);
    extargs_preemption a;
    model_pod *pod = NULL;
    victim **vs = NULL;
    bool *keep = NULL;
    as_err err = extargs_decode_preemption(req->pool, req->body, req->body_len, &a, &d);
    if (err) {
        reply_error(resp, http_status_for_decode_err(err), false, &d, err);
        goto done;
    }
    err = decode_pod(co, a.pod, &pod, &d);
    if (err) {
        reply_error(resp, http_status_for_decode_err(err), false, &d, err);
        goto done;
    }
    vs = pool_alloc(req->pool, (a.nentries ? a.nentries : 1) * sizeof *vs);
    keep = pool_alloc(req->pool, (a.nentries ? a.nentries : 1) * sizeof *keep);
    if (!vs || !keep) {
        err = as_diag_set(&d, AS_ENOMEM, NULL, "request too large for its memory budget");
        reply_error(resp, 413, false, &d, err);
        goto done;
    }
    /* Phase 1, no lock held: decode victims and ask the pod index where
     * they are (cache_pod_lookup takes the writer mutex, which must never
     * be taken under the read lock). */
    for (size_t i = 0; i < a.nentries; i++) {
        extargs_victims *en = &a.entries[i];
        vs[i] = pool_alloc(req->pool, (en->npods ? en->npods : 1) * sizeof *vs[i]);
        if (!vs[i]) {
            err = as_diag_set(&d, AS_ENOMEM, NULL, "request too large for its memory budget");
            reply_error(resp, 413, false, &d, err);
            goto done;
        }
        for (size_t k = 0; k < en->npods; k++) {
            victim *v = &vs[i][k];
            if (!a.meta) {
                err = model_pod_from_json(&co->reg, en->pods[k], &v->pod, &d);
                if (err) {
                    char prefix[400];
                    snprintf(prefix, sizeof prefix, "NodeNameToVictims.%s.Pods[%zu]", en->node, k);
                    as_diag_prefix_field(&d, prefix);
                    reply_error(resp, http_status_for_decode_err(err), false, &d, err);
                    goto done;
                }
            }
            const char *uid = en->uids[k];
            char tmp[600];
            if (!uid[0] && v->pod) {
                snprintf(tmp, sizeof tmp, "%s/%s", v->pod->ns, v->pod->name);
                uid = tmp;
            }
            if (!uid[0])
                continue;
            cache_pod_info info;
            cache_pod_lookup(co->cache, uid, &info);
            if (info.state != CACHE_POD_ABSENT && strcmp(info.node, en->node) == 0) {
                v->on_node = true;
                v->gpu_devices = info.gpu_devices;
                v->gpu_milli = info.gpu_milli;
                v->req = info.req;
            }
        }
    }
    /* Phase 2: judge every node under one read lock. Evicting pods does
     * not help where the policy would still keep the node from the pod
     * (its CPU for its free GPUs, its last free devices). */
    score_policy *pol = core_policy_get(co);
    cache_read_lock(co->cache);
    cache_shard_mode mode = cache_get_shard_mode(co->cache);
    for (size_t i = 0; i < a.nentries; i++) {
        extargs_victims *en = &a.entries[i];
        const cache_node *node = cache_node_find(co->cache, en->node, strlen(en->node));
        keep[i] = node && can_host_after(&co->reg, pol, mode, pod, node, vs[i], en->npods);
    }
    cache_read_unlock(co->cache);
    if (pol)
        score_policy_unref(pol);

    buf *o = &resp->body;
    buf_reset(o);
    buf_puts(o, "{\"NodeNameToMetaVictims\":{");
    bool first = true;
    for (size_t i = 0; i < a.nentries; i++) {
        if (!keep[i])
            continue;
        extargs_victims *en = &a.entries[i];
        if (!first)
            buf_puts(o, ",");
        first = false;
        buf_json_cstr(o, en->node);
        buf_puts(o, ":{\"Pods\":[");
        for (size_t k = 0; k < en->npods; k++) {
            buf_puts(o, k ? ",{\"UID\":" : "{\"UID\":");
            buf_json_cstr(o, en->uids[k]);
            buf_puts(o, "}");
        }
        buf_printf(o, "],\"NumPDBViolations\":%lld}", (long long)en->num_pdb_violations);
    }
    buf_puts(o, "}}");
    if (o->err) {
        err = o->err;
        as_diag_set(&d, err, NULL, "the response does not fit its buffer");
        reply_error(resp, 500, false, &d, err);
        goto done;
    }
    reply_ok(resp);
done:
    if (vs)
        for (size_t i = 0; i < a.nentries; i++)
            if (vs[i])
                for (size_t k = 0; k < a.entries[i].npods; k++)
                    model_pod_free(vs[i][k].pod);
    model_pod_free(pod);
    extargs_preemption_release(&a);
    metrics_observe(co->m.preempt_seconds, seconds_since(t0));
}

/* ------------------------------------------------------------------ */
/* state and routes                                                    */
/* ------------------------------------------------------------------ */

/* See extender.h. */
as_err extender_new(core *c, extender **out)
{
    *out = NULL;
    extender *x = calloc(1, sizeof *x);
    if (!x)
        return AS_ENOMEM;
    x->core = c;
    pthread_mutex_init(&x->unserved_mu, NULL);
    metrics_new_counters(
        c->metrics, "agentsched_extender_bind_refused_total", "rule", bind_rule_names, RULE_COUNT,
        "Extender binds refused by the authorization rules (HTTP 403), by rule.", x->refused);
    as_err err = extmemo_new(&x->memo);
    if (!err)
        err = model_specmemo_new(false, &x->specs);
    if (err) {
        extmemo_free(x->memo);
        free(x);
        return err;
    }
    *out = x;
    return AS_OK;
}

/* See extender.h. */
void extender_free(extender *x)
{
    if (!x)
        return;
    extmemo_free(x->memo);
    model_specmemo_free(x->specs);
    pthread_mutex_destroy(&x->unserved_mu);
    free(x);
}

static const http_route extender_route_table[] = {
    {"POST", EXTENDER_PATH_FILTER, extender_handle_filter, false, NULL, false, false},
    {"POST", EXTENDER_PATH_PRIORITIZE, extender_handle_prioritize, false, NULL, false, false},
    /* live mode waits for the API server's answer to the Binding */
    {"POST", EXTENDER_PATH_BIND, extender_handle_bind, true, NULL, false, false},
    {"POST", EXTENDER_PATH_PREEMPT, extender_handle_preempt, false, NULL, false, false},
};

/* See extender.h. */
const http_route *extender_routes(size_t *n)
{
    *n = sizeof extender_route_table / sizeof extender_route_table[0];
    return extender_route_table;
}

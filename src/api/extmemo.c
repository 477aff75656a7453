/*
 * extmemo.c - the extender's memos: filter scores kept for the same
 * cycle's prioritize, and the DOM rules a remembered Pod spec completes.
 */
#include "agentsched/api/extmemo.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/clock.h"
#include "agentsched/model/skip.h"

#define MEMO_SLOTS     64
#define MEMO_MAX_NAMES 8192
#define MEMO_TTL_NS    (10ull * 1000000000ull)

/* One filter's extender scores, in the filter's name order: keys[i] is
 * its i-th name's hash | 1, score[i] that name's 0..10 score. Immutable
 * once published. kube-scheduler's prioritize names the nodes that passed,
 * in the order the filter answered them: a subsequence of keys, matched
 * in one pass (extmemo_scores). */
struct extmemo_ent {
    uint64_t h1, h2;      /* the Pod's JSON bytes, two seeds */
    size_t len;           /* and their length */
    score_policy *policy; /* a reference: its address cannot be reused */
    uint64_t born_ns;
    uint32_t n, cap;
    uint64_t *keys;
    int8_t *score;
};

#define MEMO_SPARES 16

struct extmemo {
    pthread_mutex_t mu;
    extmemo_ent *slot[MEMO_SLOTS];
    /* Entries done with, tables kept: a filter reuses one instead of
     * allocating (and page-faulting) fresh tables every cycle. */
    extmemo_ent *spare[MEMO_SPARES];
    int nspare;
    /* The Pod skip rules (k8s_stream_skip) plus the root's "spec": the DOM
     * a remembered spec completes. */
    json_skip no_spec[16];
};

static const char *const spec_key[] = {"spec", NULL};

/* See extmemo.h. */
const json_skip *extmemo_spec_skip(const extmemo *m)
{
    return m->no_spec;
}

/* memo_pod_hash computes two independent 64-bit multiplicative hashes of
 * the Pod's bytes s[0..n) in one pass, 8 bytes a step (a kube-scheduler
 * Pod is ~5 KB, hashed at every filter and prioritize). */
static void memo_pod_hash(const char *s, size_t n, uint64_t *h1, uint64_t *h2)
{
    const uint64_t k = 0x9E3779B97F4A7C15ull, k2 = 0xC2B2AE3D27D4EB4Full;
    uint64_t a = 1 ^ (n * k), b = 2 ^ (n * k2);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        a = (a ^ w) * k;
        a ^= a >> 32;
        b = (b ^ w) * k2;
        b ^= b >> 29;
    }
    /* The tail: the string's last 8 bytes (overlapping the words above)
     * when it has 8, else its bytes one by one; a variable-length memcpy
     * into a word would stall on store forwarding. */
    uint64_t w = 0;
    if (n >= 8) {
        memcpy(&w, s + n - 8, 8);
    } else {
        for (size_t j = 0; j < n; j++)
            w |= (uint64_t)(unsigned char)s[j] << (8 * j);
    }
    a = (a ^ w) * k;
    a ^= a >> 29;
    a *= 0xBF58476D1CE4E5B9ull;
    *h1 = a ^ (a >> 32);
    b = (b ^ w) * k2;
    b ^= b >> 31;
    b *= 0x94D049BB133111EBull;
    *h2 = b ^ (b >> 32);
}

static void memo_ent_free(extmemo_ent *e)
{
    if (!e)
        return;
    if (e->policy)
        score_policy_unref(e->policy);
    free(e->keys);
    free(e->score);
    free(e);
}

/* See extmemo.h. */
void extmemo_recycle(extmemo *m, extmemo_ent *e)
{
    if (!e)
        return;
    if (e->policy) {
        score_policy_unref(e->policy);
        e->policy = NULL;
    }
    pthread_mutex_lock(&m->mu);
    if (m->nspare < MEMO_SPARES) {
        m->spare[m->nspare++] = e;
        e = NULL;
    }
    pthread_mutex_unlock(&m->mu);
    memo_ent_free(e);
}

/* memo_spare returns a recycled entry with room for size names, or NULL. */
static extmemo_ent *memo_spare(extmemo *m, uint32_t size)
{
    extmemo_ent *e = NULL;
    pthread_mutex_lock(&m->mu);
    for (int i = m->nspare - 1; i >= 0; i--)
        if (m->spare[i]->cap >= size) {
            e = m->spare[i];
            m->spare[i] = m->spare[--m->nspare];
            break;
        }
    pthread_mutex_unlock(&m->mu);
    return e;
}

/* See extmemo.h. */
as_err extmemo_new(extmemo **out)
{
    extmemo *m = calloc(1, sizeof *m);
    if (!m)
        return AS_ENOMEM;
    pthread_mutex_init(&m->mu, NULL);
    const json_skip *pod = model_skip_pod();
    size_t n = 0;
    const size_t room = sizeof m->no_spec / sizeof m->no_spec[0] - 2;
    for (; pod && pod[n].parent; n++) {
        if (n >= room) {
            /* the k8s module's table outgrew no_spec: grow it with it */
            fprintf(stderr, "extender: %zu Pod skip rules exceed no_spec\n", n);
            abort();
        }
        m->no_spec[n] = pod[n];
    }
    m->no_spec[n++] = (json_skip){"", spec_key};
    m->no_spec[n] = (json_skip){NULL, NULL};
    *out = m;
    return AS_OK;
}

/* See extmemo.h. */
void extmemo_free(extmemo *m)
{
    if (!m)
        return;
    for (int i = 0; i < MEMO_SLOTS; i++)
        memo_ent_free(m->slot[i]);
    for (int i = 0; i < m->nspare; i++)
        memo_ent_free(m->spare[i]);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

/* See extmemo.h. */
void extmemo_put(extmemo *m, const extargs_args *a, score_policy *policy, const sched_name *names,
                 const int8_t *score, size_t n)
{
    if (!m || !a->pod_raw || !n || n > MEMO_MAX_NAMES)
        return;
    uint32_t size = 16;
    while (size < n)
        size *= 2;
    extmemo_ent *e = memo_spare(m, size);
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e || !(e->keys = malloc(size * sizeof *e->keys)) ||
            !(e->score = malloc(size * sizeof *e->score))) {
            memo_ent_free(e);
            return;
        }
        e->cap = size;
    }
    for (size_t i = 0; i < n; i++)
        e->keys[i] = sched_name_hash(&names[i]) | 1;
    memcpy(e->score, score, n);
    e->n = (uint32_t)n;
    memo_pod_hash(a->pod_raw, a->pod_raw_len, &e->h1, &e->h2);
    e->len = a->pod_raw_len;
    e->policy = score_policy_ref(policy);
    e->born_ns = clock_mono_ns();
    pthread_mutex_lock(&m->mu);
    extmemo_ent **slot = &m->slot[e->h1 % MEMO_SLOTS];
    extmemo_ent *old = *slot;
    *slot = e;
    pthread_mutex_unlock(&m->mu);
    extmemo_recycle(m, old);
}

/* See extmemo.h. */
extmemo_ent *extmemo_take(extmemo *m, const extargs_args *a, const score_policy *policy)
{
    if (!m || !a->pod_raw)
        return NULL;
    uint64_t h1, h2;
    memo_pod_hash(a->pod_raw, a->pod_raw_len, &h1, &h2);
    extmemo_ent *e = NULL;
    pthread_mutex_lock(&m->mu);
    extmemo_ent **slot = &m->slot[h1 % MEMO_SLOTS];
    if (*slot && (*slot)->h1 == h1 && (*slot)->h2 == h2 && (*slot)->len == a->pod_raw_len) {
        e = *slot;
        *slot = NULL;
    }
    pthread_mutex_unlock(&m->mu);
    if (e && (e->policy != policy || clock_mono_ns() - e->born_ns > MEMO_TTL_NS)) {
        extmemo_recycle(m, e);
        e = NULL;
    }
    return e;
}

/* See extmemo.h. */
bool extmemo_scores(const extmemo_ent *e, const sched_name *names, size_t n, int8_t *out, pool *p)
{
    size_t j = 0, i = 0;
    for (; i < n; i++) {
        uint64_t key = sched_name_hash(&names[i]) | 1;
        while (j < e->n && e->keys[j] != key)
            j++;
        if (j == e->n)
            break;
        out[i] = e->score[j++];
    }
    if (i == n)
        return true;
    uint32_t size = 16;
    while (size < 2 * e->n)
        size *= 2;
    uint32_t *tab = pool_alloc(p, size * sizeof *tab); /* index + 1; 0 = empty */
    if (!tab)
        return false;
    for (uint32_t k = 0; k < e->n; k++) {
        uint32_t h = (uint32_t)(e->keys[k] >> 32) & (size - 1);
        while (tab[h])
            h = (h + 1) & (size - 1);
        tab[h] = k + 1;
    }
    for (i = 0; i < n; i++) {
        uint64_t key = sched_name_hash(&names[i]) | 1;
        uint32_t h = (uint32_t)(key >> 32) & (size - 1);
        while (tab[h] && e->keys[tab[h] - 1] != key)
            h = (h + 1) & (size - 1);
        if (!tab[h])
            return false;
        out[i] = e->score[tab[h] - 1];
    }
    return true;
}

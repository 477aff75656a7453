/*
 * specmemo.c - see specmemo.h. test_specmemo holds a spec found to the
 * one put, by text and by projection, and a changed generation to a miss.
 */
#include "agentsched/model/specmemo.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/hash.h"
#include "agentsched/base/json.h"

#define SPEC_MEMO_SLOTS   64
#define SPEC_MEMO_MAX_LEN (64u << 10)
#define SPEC_SEEN_SLOTS   256

enum { BY_TEXT, BY_PROJECTION, BY__COUNT };

typedef struct spec_ent {
    uint64_t h;
    size_t len;
    char *text; /* the key text, compared whole on a hash match */
    model_pod_spec *spec;
} spec_ent;

struct model_specmemo {
    pthread_mutex_t mu;
    spec_ent specs[BY__COUNT][SPEC_MEMO_SLOTS]; /* under mu */
    uint64_t seen[SPEC_SEEN_SLOTS];             /* under mu: recent misses' keys */
    bool second_miss;
};

/* See specmemo.h. */
as_err model_specmemo_new(bool second_miss, model_specmemo **out)
{
    model_specmemo *m = calloc(1, sizeof *m);
    if (!m)
        return AS_ENOMEM;
    m->second_miss = second_miss;
    pthread_mutex_init(&m->mu, NULL);
    *out = m;
    return AS_OK;
}

static void spec_ent_clear(spec_ent *e)
{
    free(e->text);
    model_pod_spec_unref(e->spec);
    memset(e, 0, sizeof *e);
}

/* See specmemo.h. */
void model_specmemo_free(model_specmemo *m)
{
    if (!m)
        return;
    for (int t = 0; t < BY__COUNT; t++)
        for (int i = 0; i < SPEC_MEMO_SLOTS; i++)
            spec_ent_clear(&m->specs[t][i]);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static model_pod_spec *get(model_specmemo *m, int by, uint64_t h, const char *text, size_t len,
                           int gen)
{
    model_pod_spec *out = NULL;
    pthread_mutex_lock(&m->mu);
    spec_ent *e = &m->specs[by][h % SPEC_MEMO_SLOTS];
    if (e->spec && e->h == h && e->len == len && model_pod_spec_generation(e->spec) == gen &&
        memcmp(e->text, text, len) == 0)
        out = model_pod_spec_ref(e->spec);
    pthread_mutex_unlock(&m->mu);
    return out;
}

/* See specmemo.h. */
model_pod_spec *model_specmemo_find(model_specmemo *m, int gen, const char *text, size_t len,
                                    const struct json_skip *rules, char *scratch, size_t cap,
                                    model_specmemo_keys *keys)
{
    memset(keys, 0, sizeof *keys);
    keys->h = hash_span(text, len);
    keys->text = text;
    keys->len = len;
    model_pod_spec *spec = get(m, BY_TEXT, keys->h, text, len, gen);
    if (spec)
        return spec;
    /* a spec the projection does not follow (an escaped key, a number the
     * builder refuses) has no second key */
    size_t plen = 0;
    if (scratch && cap >= len && json_project(text, len, rules, "spec", scratch, cap, &plen)) {
        keys->hp = hash_span(scratch, plen);
        keys->proj = scratch;
        keys->plen = plen;
        if ((spec = get(m, BY_PROJECTION, keys->hp, scratch, plen, gen)))
            return spec;
    }
    keys->admit = !m->second_miss;
    if (keys->admit)
        return NULL;
    /* the widest key, | 1 so that an empty slot never matches */
    uint64_t k = (keys->proj ? keys->hp : keys->h) | 1;
    pthread_mutex_lock(&m->mu);
    uint64_t *slot = &m->seen[k % SPEC_SEEN_SLOTS];
    keys->admit = *slot == k;
    *slot = k;
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

static void put(model_specmemo *m, int by, uint64_t h, const char *text, size_t len,
                model_pod_spec *spec)
{
    char *copy = len <= SPEC_MEMO_MAX_LEN ? malloc(len ? len : 1) : NULL;
    if (!copy)
        return;
    memcpy(copy, text, len);
    spec_ent old, e = {h, len, copy, model_pod_spec_ref(spec)};
    pthread_mutex_lock(&m->mu);
    old = m->specs[by][h % SPEC_MEMO_SLOTS];
    m->specs[by][h % SPEC_MEMO_SLOTS] = e;
    pthread_mutex_unlock(&m->mu);
    spec_ent_clear(&old);
}

/* See specmemo.h. */
void model_specmemo_put(model_specmemo *m, const model_specmemo_keys *keys, model_pod_spec *spec)
{
    if (!m || !spec || !keys->admit)
        return;
    if (keys->text)
        put(m, BY_TEXT, keys->h, keys->text, keys->len, spec);
    if (keys->proj)
        put(m, BY_PROJECTION, keys->hp, keys->proj, keys->plen, spec);
}

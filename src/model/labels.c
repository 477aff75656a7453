/* labels.c - label lookup, toleration and node-affinity matching. */
#include "agentsched/model/labels.h"

#include <string.h>

/* See labels.h. */
const char *model_labels_get(const model_labels *l, const char *key)
{
    if (!l || !key)
        return NULL;
    uint32_t lo = 0, hi = l->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = strcmp(l->items[mid].key, key);
        if (c == 0)
            return l->items[mid].value;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* See labels.h. Mirrors v1.Toleration.ToleratesTaint: an empty effect
 * matches every effect, an empty key every key (the API only allows that
 * with Exists, but the matcher itself does not care), Exists ignores the
 * value, Equal compares it, Lt/Gt compare it as integers. */
bool model_toleration_matches(const model_toleration *t, const model_taint *taint)
{
    if (t->effect != MODEL_EFFECT_ALL && t->effect != taint->effect)
        return false;
    if (t->key[0] && strcmp(t->key, taint->key) != 0)
        return false;
    switch (t->op) {
    case MODEL_TOL_EXISTS:
        return true;
    case MODEL_TOL_EQUAL:
        return strcmp(t->value, taint->value) == 0;
    case MODEL_TOL_LT:
    case MODEL_TOL_GT: {
        int64_t tv, nv;
        /* either side not an integer: not tolerated */
        if (!model_labels_parse_int64(t->value, &tv) ||
            !model_labels_parse_int64(taint->value, &nv))
            return false;
        return t->op == MODEL_TOL_LT ? nv < tv : nv > tv;
    }
    }
    return false;
}

/* See labels.h. */
bool model_labels_parse_int64(const char *s, int64_t *out)
{
    const char *p = s;
    bool neg = false;
    if (*p == '+' || *p == '-') {
        neg = *p == '-';
        p++;
    }
    if (!*p)
        return false;
    uint64_t mag = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        if (mag > (UINT64_MAX - 9) / 10)
            return false;
        mag = mag * 10 + (uint64_t)(*p - '0');
    }
    if (neg) {
        if (mag > (uint64_t)INT64_MAX + 1)
            return false;
        *out = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    } else {
        if (mag > (uint64_t)INT64_MAX)
            return false;
        *out = (int64_t)mag;
    }
    return true;
}

static bool value_in(const model_selector_req *r, const char *v)
{
    for (uint32_t i = 0; i < r->nvalues; i++) {
        if (strcmp(r->values[i], v) == 0)
            return true;
    }
    return false;
}

/* One requirement against one value (NULL = label absent), following
 * labels.Requirement.Matches. */
static bool req_matches(const model_selector_req *r, const char *v)
{
    switch (r->op) {
    case MODEL_SEL_IN:
        return v && value_in(r, v);
    case MODEL_SEL_NOT_IN:
        return !v || !value_in(r, v);
    case MODEL_SEL_EXISTS:
        return v != NULL;
    case MODEL_SEL_DOES_NOT_EXIST:
        return v == NULL;
    case MODEL_SEL_GT:
    case MODEL_SEL_LT: {
        int64_t x;
        /* a label that is not an integer never satisfies Gt/Lt */
        if (!v || !model_labels_parse_int64(v, &x))
            return false;
        return r->op == MODEL_SEL_GT ? x > r->num : x < r->num;
    }
    }
    return false;
}

static bool term_matches(const model_selector_term *t, const char *node_name,
                         const model_labels *labels)
{
    /* an empty term selects nothing (nodeaffinity skips it) */
    if (t->nexprs == 0 && t->nfields == 0)
        return false;
    for (uint32_t i = 0; i < t->nexprs; i++) {
        if (!req_matches(&t->exprs[i], model_labels_get(labels, t->exprs[i].key)))
            return false;
    }
    for (uint32_t i = 0; i < t->nfields; i++) {
        /* the decoder only admits metadata.name */
        if (!req_matches(&t->fields[i], node_name ? node_name : ""))
            return false;
    }
    return true;
}

/* See labels.h. */
bool model_affinity_matches(const model_affinity *a, const char *node_name,
                            const model_labels *node_labels)
{
    if (!a || !a->present)
        return true;
    for (uint32_t i = 0; i < a->nterms; i++) {
        if (term_matches(&a->terms[i], node_name, node_labels))
            return true;
    }
    return false;
}

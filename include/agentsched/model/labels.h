/*
 * labels.h - label sets, taints, tolerations and required node affinity,
 * as decoded Nodes and Pods hold them, and the matching between them.
 */
#ifndef AGENTSCHED_MODEL_LABELS_H
#define AGENTSCHED_MODEL_LABELS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct model_kv {
    const char *key;
    const char *value;
} model_kv;

/* A label set, sorted by key (strcmp) for binary search. */
typedef struct model_labels {
    const model_kv *items;
    uint32_t n;
} model_labels;

/* model_labels_get returns the value of key, or NULL if absent. */
const char *model_labels_get(const model_labels *l, const char *key);

/* model_labels_parse_int64 parses a label or taint value as the Gt/Lt
 * operators compare it: an optionally signed base-10 integer that uses the
 * whole of s (like Go's strconv.ParseInt(s, 10, 64)). */
bool model_labels_parse_int64(const char *s, int64_t *out);

typedef enum model_effect {
    MODEL_EFFECT_ALL = 0, /* only in tolerations: empty effect matches all */
    MODEL_EFFECT_NO_SCHEDULE,
    MODEL_EFFECT_PREFER_NO_SCHEDULE,
    MODEL_EFFECT_NO_EXECUTE,
} model_effect;

typedef struct model_taint {
    const char *key;
    const char *value; /* "" when absent */
    model_effect effect;
} model_taint;

/* LT/GT (TaintTolerationComparisonOperators): the taint's value compared
 * numerically with the toleration's, both base-10 int64; taint < / >
 * toleration. */
typedef enum model_tol_op {
    MODEL_TOL_EQUAL = 0,
    MODEL_TOL_EXISTS,
    MODEL_TOL_LT,
    MODEL_TOL_GT,
} model_tol_op;

typedef struct model_toleration {
    const char *key;   /* "" with EXISTS tolerates every key */
    const char *value; /* "" when absent */
    model_tol_op op;
    model_effect effect;
} model_toleration;

/* model_toleration_matches follows v1 Toleration.ToleratesTaint. */
bool model_toleration_matches(const model_toleration *t, const model_taint *taint);

typedef enum model_sel_op {
    MODEL_SEL_IN = 0,
    MODEL_SEL_NOT_IN,
    MODEL_SEL_EXISTS,
    MODEL_SEL_DOES_NOT_EXIST,
    MODEL_SEL_GT,
    MODEL_SEL_LT,
} model_sel_op;

typedef struct model_selector_req {
    const char *key;
    model_sel_op op;
    const char *const *values;
    uint32_t nvalues;
    int64_t num; /* parsed values[0] for GT/LT */
} model_selector_req;

/* One NodeSelectorTerm: all expressions AND all fields must match. */
typedef struct model_selector_term {
    const model_selector_req *exprs;
    uint32_t nexprs;
    const model_selector_req *fields; /* key is always "metadata.name" */
    uint32_t nfields;
} model_selector_term;

/* requiredDuringSchedulingIgnoredDuringExecution: terms are ORed. present=false
 * means no constraint; present with nterms==0 matches no node (as upstream). */
typedef struct model_affinity {
    bool present;
    const model_selector_term *terms;
    uint32_t nterms;
} model_affinity;

/* model_affinity_matches reports whether a node with this name and labels
 * satisfies the affinity (true when !present). */
bool model_affinity_matches(const model_affinity *a, const char *node_name,
                            const model_labels *node_labels);

#endif

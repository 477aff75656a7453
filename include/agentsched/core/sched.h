/*
 * sched.h - evaluate one pod against the cache: the decision core shared
 * by the kube-scheduler extender, the Volcano extender, dry-run placement
 * and the fast-path workers.
 *
 * sched_evaluate scans either the named nodes (extender: NodeNames / Nodes)
 * or every node, under the cache read lock, in place: predicates, then
 * scores for the feasible nodes, keeping the top K candidates. Each
 * candidate carries the node's bind_version loaded (acquire) before its
 * usage was read, for the versioned binder.
 *
 * Soft shard mode: in-shard nodes get the policy's bonus; when scanning all
 * nodes, out-of-shard nodes are only candidates if no in-shard node fits.
 */
#ifndef AGENTSCHED_SCHED_H
#define AGENTSCHED_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "agentsched/core/cache.h"
#include "agentsched/model/pod.h"
#include "agentsched/core/pred.h"
#include "agentsched/core/score.h"

#define SCHED_MAX_K 16

/* Named nodes are resolved, and answered by an oracle, this many at a
 * time. */
#define SCHED_ORACLE_BLOCK 64

typedef struct sched_candidate {
    uint32_t slot;         /* node slot at evaluation */
    uint64_t node_id;      /* node incarnation */
    uint64_t bind_version; /* seen at evaluation */
    double score;          /* [0, 100] (+ soft-shard bonus) */
    const char *name;      /* borrowed from the node spec: valid only while the
                              node exists; copy before releasing the read lock
                              if needed beyond it */
} sched_candidate;

/* A name given by the caller (cache.h's cache_name: pointer + length, and
 * its cache_name_hash or 0), so that a request's names go to the cache's
 * batched lookup as they are. */
typedef cache_name sched_name;

/* sched_name_hash is n's cache_name_hash, computed only when n lacks it. */
static inline uint64_t sched_name_hash(const sched_name *n)
{
    return n->hash ? n->hash : cache_name_hash(n->s, n->len);
}

/* sched_name_cmp orders names (NUL-free, not NUL-terminated) like strcmp:
 * the order in which candidates of equal score rank (the smaller first),
 * here and wherever another list must agree with them (the extender's
 * shortlist). */
static inline int sched_name_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen, i = 0;
    /* Names are short and ties on score are common (identical nodes), so
     * compare eight bytes at a time inline; big-endian order of a word is
     * the byte order memcmp uses. */
    for (; i + 8 <= n; i += 8) {
        uint64_t x, y;
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        if (x != y) {
            x = __builtin_bswap64(x);
            y = __builtin_bswap64(y);
            return x < y ? -1 : 1;
        }
    }
    for (; i < n; i++)
        if (a[i] != b[i])
            return (unsigned char)a[i] < (unsigned char)b[i] ? -1 : 1;
    return alen < blen ? -1 : alen > blen;
}

/* Per-reason counts: "3000 Insufficient cpu". Buckets are keyed by
 * (code, arg), where for PRED_TAINT arg is a hash of the taint's key and
 * value (taint indexes differ between nodes); text is rendered once per
 * bucket, from the first node that produced it, before the read lock is
 * released. */
typedef struct sched_reason_count {
    pred_result reason;
    uint32_t count;
    char text[160];
} sched_reason_count;

/*
 * An evaluation oracle (eqcache.h): answers a node's fit and score from
 * evaluations made earlier for pods of the same shape. Both callbacks run
 * under the cache read lock sched_evaluate holds.
 */
typedef struct sched_oracle {
    /* prepare: once, right after the read lock is taken (bring the
     * remembered evaluations up to date); non-AS_OK aborts the evaluation. */
    as_err (*prepare)(void *arg);
    /* lookup_n: for each of nodes[0..n) (NULL entries allowed: unknown
     * names), fit[i] = 1 with score[i] (soft-shard bonus included) and
     * version[i] (the bind_version loaded before that evaluation read the
     * usage) when the node fitted at its last evaluation, else fit[i] = 0,
     * which sends sched_evaluate to evaluate the node itself (for an
     * infeasible node, the reason). Names are resolved a block at a time,
     * so the oracle can overlap a block's cache misses. Of a node it may
     * read only node->slot. */
    void (*lookup_n)(void *arg, const cache_node *const *nodes, size_t n, double *score,
                     uint64_t *version, uint8_t *fit); /* n <= SCHED_ORACLE_BLOCK */
    void *arg;
} sched_oracle;

typedef struct sched_request {
    const model_pod *pod;       /* borrowed */
    const score_policy *policy; /* borrowed */
    const sched_name *names;    /* NULL: every node in the cache */
    size_t nnames;
    uint32_t k;        /* top-K candidates to keep (<= SCHED_MAX_K) */
    bool names_unique; /* no name occurs twice (the caller de-duplicated
                          them): top-K need not look for repeats */
    bool score_all;    /* fill per-name scores (prioritize) */
    bool skip_filter;  /* prioritize: names were already filtered upstream;
                          still scores only nodes that exist */
    /* Early stop when scanning every node (ignored with names), like
     * kube-scheduler's percentageOfNodesToScore: 0 = full scan (default);
     * else stop once this many feasible (in-shard, in soft mode) nodes were
     * found. The scan starts at node index `start` modulo the node count and
     * wraps, so a caller rotating `start` spreads its samples. */
    uint32_t max_feasible;
    uint32_t start;
    /* Optional (NULL: evaluate every node here); not with skip_filter. */
    const sched_oracle *oracle;
} sched_request;

/*
 * Result. When names were given, per_name[i] / score[i] correspond to
 * names[i] (arrays of nnames, owned by the result). reasons holds up to
 * SCHED_MAX_REASONS distinct reasons with counts (sorted by count desc).
 */
#define SCHED_MAX_REASONS 32
#define SCHED_NO_REASON   0xff /* reason_of: fitted, or no bucket holds its text */
typedef struct sched_result {
    pred_result *per_name; /* NULL when scanning all nodes */
    double *score;         /* per name, -1 for infeasible; NULL unless score_all */
    /* per name: the index in reasons[] of the bucket whose text is that
     * name's failure (pred_reason's text for it), or SCHED_NO_REASON (it
     * fitted, the buckets were full, or its taint only hashed like the
     * bucket's); NULL when scanning all nodes */
    uint8_t *reason_of;
    size_t nnames;
    size_t evaluated; /* nodes looked at */
    size_t feasible;
    sched_candidate cand[SCHED_MAX_K];
    uint32_t ncand; /* sorted by score desc, ties by node name */
    sched_reason_count reasons[SCHED_MAX_REASONS];
    uint32_t nreasons;
    uint64_t shard_revision; /* shard revision the decision was made against */
} sched_result;

/* sched_result_init empties r: every count and pointer is zeroed, the
 * entries of cand[] and reasons[] are left as they are (read up to ncand
 * and nreasons only; a new field must be zeroed there too).
 * sched_result_free releases its arrays. */
void sched_result_init(sched_result *r);
void sched_result_free(sched_result *r);

/*
 * sched_evaluate runs one decision. Takes and releases the cache read lock
 * itself (candidate names are therefore only hints after return; use
 * slot/node_id). AS_ENOMEM on allocation failure; an infeasible pod is not
 * an error (ncand == 0, reasons filled).
 */
as_err sched_evaluate(cache *c, const sched_request *req, sched_result *out);

/*
 * sched_format_unschedulable writes kube-scheduler's message, e.g.
 * "0/5000 nodes are available: 3000 Insufficient cpu, 2000 node(s) had
 * untolerated taint {a: b}." into out.
 */
const char *sched_format_unschedulable(const sched_result *r, size_t total_nodes, char *out,
                                       size_t len);

#endif

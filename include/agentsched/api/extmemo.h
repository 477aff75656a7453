/*
 * extmemo.h - the extender's memos (extender.c owns one per extender).
 *
 * The filter -> prioritize memo. kube-scheduler calls prioritize right
 * after filter in the same scheduling cycle, with the same Pod (byte for
 * byte) and the nodes that passed. Filter scores every node it passes
 * anyway, so it leaves the extender scores of its nodes here, keyed by the
 * Pod's JSON bytes and the policy; a prioritize whose Pod bytes, policy and
 * every node match (within 10 s) answers from it without decoding the Pod
 * or evaluating again, and consumes it. The scores are those of the
 * filter's moment, as kube-scheduler's own scoring uses the cycle's
 * snapshot; the bind re-checks against the live state either way.
 * Direct-mapped, 64 entries of at most 8192 nodes.
 *
 * The Pod spec memo (decoded specs by their text) is the model's
 * (specmemo.h); this module gives the DOM rules a remembered spec
 * completes (extmemo_spec_skip).
 *
 * Every function is thread-safe (one mutex per memo).
 */
#ifndef AGENTSCHED_API_EXTMEMO_H
#define AGENTSCHED_API_EXTMEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/api/extargs.h"
#include "agentsched/base/error.h"
#include "agentsched/base/pool.h"
#include "agentsched/core/sched.h"
#include "agentsched/core/score.h"
#include "agentsched/model/pod.h"

typedef struct extmemo extmemo;

/* One filter's remembered scores, taken out of the memo (extmemo_take). */
typedef struct extmemo_ent extmemo_ent;

/* extmemo_new allocates an empty memo (AS_ENOMEM); the caller owns it.
 * extmemo_free frees it and every entry; NULL ok; no handler may still be
 * using it. */
as_err extmemo_new(extmemo **out);
void extmemo_free(extmemo *m);

/* extmemo_put publishes the scores of a filter for a's Pod bytes and
 * policy (names[i] -> score[i]); best effort: nothing is remembered when
 * memory is short, n is too big or m is NULL. */
void extmemo_put(extmemo *m, const extargs_args *a, score_policy *policy, const sched_name *names,
                 const int8_t *score, size_t n);

/* extmemo_take removes and returns the entry for a's Pod bytes and policy
 * when one is fresh, else NULL; the caller hands it back with
 * extmemo_recycle (which keeps its tables for reuse; NULL ok). */
extmemo_ent *extmemo_take(extmemo *m, const extargs_args *a, const score_policy *policy);
void extmemo_recycle(extmemo *m, extmemo_ent *e);

/* extmemo_scores fills out[i] with the remembered score of names[i];
 * false when some name is not in e (then out is partly written). Names in
 * the filter's order (the usual prioritize) are matched in one pass;
 * others go through a hash table of e's names built in p for this call. */
bool extmemo_scores(const extmemo_ent *e, const sched_name *names, size_t n, int8_t *out, pool *p);

/* extmemo_spec_skip returns the Pod skip rules (k8s_stream_skip) plus the
 * root's "spec": the DOM a remembered spec completes. */
const json_skip *extmemo_spec_skip(const extmemo *m);

#endif

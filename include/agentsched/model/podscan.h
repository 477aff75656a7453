/*
 * podscan.h - a Pod's watch event read without building it: one scanner
 * pass (jscan.h) that takes the few fields a pod's identity, binding and
 * lifecycle need and a digest of every member the pod decoder
 * (model_pod_from_json) reads, so that an event which changes nothing the
 * cache accounts for can be applied without the full decode.
 *
 * THE DIGEST
 *   A 64-bit hash over each member's key and raw text: top-level members
 *   other than metadata, spec and status (kind, apiVersion); every member
 *   of metadata except resourceVersion, generation, managedFields,
 *   deletionTimestamp and deletionGracePeriodSeconds; every member of
 *   spec except nodeName; status.phase alone. What it leaves out is what
 *   the decoder never reads (managedFields, generation,
 *   deletionGracePeriodSeconds, the rest of status: skip.h leaves most of
 *   it out of the tree), plus what the brief carries itself
 *   (resourceVersion; deletionTimestamp, as terminating, so that a
 *   deletion's MODIFIED of a pod the cache holds needs no decode) and
 *   spec.nodeName (compared on its own by whoever uses the digest: the
 *   binding changes it). Two texts with the same digest, nodeName and
 *   terminating decode to the same pod but for resource_version; texts that
 *   differ only in spacing, key order or escapes may digest differently,
 *   which only costs a full decode.
 */
#ifndef AGENTSCHED_MODEL_PODSCAN_H
#define AGENTSCHED_MODEL_PODSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"
#include "agentsched/base/jscan.h"
#include "agentsched/model/pod.h"
#include "agentsched/model/registry.h"

/* What model_podscan read. Spans point into the scanned text, raw JSON
 * string contents; s == NULL when the member is absent. */
typedef struct model_pod_brief {
    uint64_t digest;
    model_span uid, ns, name, resource_version, node_name, scheduler_name, phase;
    bool terminating; /* metadata.deletionTimestamp present and not null */
    model_span spec;  /* the spec member's value, its raw text (the last one) */
    /* Every span above is a plain string (no escape) and every member
     * read had the type the decoder wants: a pod can be built from the
     * brief (model_pod_from_brief). False: decode the object instead. */
    bool plain;
} model_pod_brief;

/*
 * model_podscan scans the Pod object at s->p (whitespace before it
 * allowed), stepping past it, and fills *out. 1, or 0 with s failed (the
 * text is not JSON: s->err, s->diag). A value that is JSON but not a Pod
 * the decoder would accept leaves out->plain false.
 */
int model_podscan(jscan *s, model_pod_brief *out);

/*
 * model_pod_digest is the digest a decoded pod carries (model_pod digest)
 * and the cache compares: the brief's, tied to the registry's size, since
 * the same text decoded after new resource names were registered may
 * charge more. Never 0.
 */
uint64_t model_pod_digest(const model_registry *reg, const model_pod_brief *b);

/*
 * model_pod_from_brief builds the pod a brief stands for: ns (default
 * "default"), name, uid, resource_version, node_name (NULL when absent or
 * ""), scheduler_name (default "default-scheduler"), phase, terminating;
 * everything else zero (no request, labels, selectors). For the pod hooks
 * of events applied without a decode, which read only those fields.
 * AS_EINVAL when !b->plain or the phase is not one the decoder accepts,
 * AS_ENOMEM. Caller owns *out (model_pod_free).
 */
as_err model_pod_from_brief(const model_pod_brief *b, model_pod **out);

/*
 * model_pod_brief_key writes the pod's key (model_pod_key: the uid, or
 * "namespace/name") into out[0..cap) and returns false when it does not
 * fit or the brief is not plain.
 */
bool model_pod_brief_key(const model_pod_brief *b, char *out, size_t cap);

/*
 * model_pod_fields_read takes out of the Pod object pod[0..len) (JSON the
 * scanner validated) the members model_pod_from_fields reads: true with
 * *f filled, its labels in keys/values (room for cap), when each is the
 * plain case: strings without escapes, no escaped key, members of the
 * types the pod model takes. false otherwise, or when the span holds what
 * the Pod's DOM builder may refuse (json_iter_next): decode the DOM then,
 * which decides. A value starting at known (NULL: none) ends at known_end
 * and is not walked (the spec, found by the caller). f's spans point into
 * pod.
 */
bool model_pod_fields_read(const char *pod, size_t len, const char *known, const char *known_end,
                           model_pod_fields *f, model_span *keys, model_span *values, size_t cap);

#endif

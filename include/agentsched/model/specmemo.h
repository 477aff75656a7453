/*
 * specmemo.h - decoded Pod specs (model_pod_spec) remembered by their
 * text, so that pods of one template decode their spec once: the
 * extender's filter and prioritize Pods and the pod watch's events.
 *
 * Two direct-mapped tables of 64 slots: by the spec's exact text (pods of
 * one template), and by its projection through a skip rule table
 * (json_project: the spec less what the model never reads, so that pods
 * which differ only in env, args, probes or volumes share one). A text
 * over 64 KiB is not remembered: a memo holds at most 8 MiB of keys. A
 * memo made to remember on a second miss (a table of 256 recent misses'
 * hashes) lets pods whose specs are each their own cost a lookup, never
 * a decode apart or an entry evicted: for a stream of every pod in the
 * cluster. A spec is found only under the registry generation it was
 * decoded at (model_pod_spec_generation): a resource registered since may
 * charge the same text more.
 *
 * Every function is thread-safe (one mutex per memo).
 */
#ifndef AGENTSCHED_MODEL_SPECMEMO_H
#define AGENTSCHED_MODEL_SPECMEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"
#include "agentsched/model/pod.h"

struct json_skip;

typedef struct model_specmemo model_specmemo;

/* The keys a lookup tried (model_specmemo_find), for remembering the spec
 * its miss decodes (model_specmemo_put). Spans are borrowed from the
 * caller's text and scratch. */
typedef struct model_specmemo_keys {
    uint64_t h;
    const char *text;
    size_t len;
    uint64_t hp;      /* the projection's hash */
    const char *proj; /* NULL: no projection (not tried, or not followed) */
    size_t plen;
    bool admit; /* worth remembering (see second_miss) */
} model_specmemo_keys;

/* model_specmemo_new allocates an empty memo (AS_ENOMEM); the caller owns
 * it. second_miss: a spec is worth remembering (keys admit) from the
 * second miss under its key, not the first. model_specmemo_free frees it
 * and drops its references; NULL ok. */
as_err model_specmemo_new(bool second_miss, model_specmemo **out);
void model_specmemo_free(model_specmemo *m);

/*
 * model_specmemo_find returns a reference to the spec remembered for the
 * validated JSON spec text[0..len) at registry generation gen, or NULL.
 * The exact text is tried first, then its projection through rules (the
 * table the spec's decode uses, json_project with parent "spec"), written
 * into scratch[0..cap) (cap >= len to be tried). *keys gets what was tried,
 * for model_specmemo_put after a miss; it borrows text and scratch. The
 * caller drops the reference with model_pod_spec_unref.
 */
model_pod_spec *model_specmemo_find(model_specmemo *m, int gen, const char *text, size_t len,
                                    const struct json_skip *rules, char *scratch, size_t cap,
                                    model_specmemo_keys *keys);

/* model_specmemo_put remembers spec (a reference is taken) under every key
 * in *keys, replacing what sat in those slots, when keys->admit; best
 * effort: nothing is remembered for a text over the cap or when memory is
 * short. */
void model_specmemo_put(model_specmemo *m, const model_specmemo_keys *keys, model_pod_spec *spec);

#endif

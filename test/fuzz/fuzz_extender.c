/*
 * fuzz_extender.c - libFuzzer target for the kube-scheduler extender's
 * filter, prioritize and preempt verbs, whole: decoding, evaluation and
 * the answer the handler writes.
 *
 * The first input byte picks the verb (its value mod 3) and the policy
 * (the default, or with an extender.shortlist of 2 when (byte / 3) is
 * odd); the rest is the request body, run through the handler the way the
 * HTTP server would (NUL-terminated copy, a fresh request pool) against the
 * extender fixtures' cluster. Every
 * answer must be JSON; errors must carry "error" and "field". When the
 * verb answered 200 and jansson reads the request too, every node name in
 * the answer (filter: NodeNames, FailedNodes and FailedAndUnresolvableNodes
 * keys; prioritize: Host) must be one of the request's names, and a
 * shortlisted filter answers at most 2 names: the writer
 * echoes names straight from the request body when they had no escapes,
 * and this holds it to the decoded text. bind is left out: it assumes pods
 * into the shared cache (fuzz_volcano covers that kind of state). The
 * checks abort() rather than assert(): fuzz builds are RelWithDebInfo.
 * Seeds: test/fuzz/corpus/extender (the fixtures' requests, verb byte
 * prepended).
 */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agentsched/api/extender.h"
#include "agentsched/core/policy.h"
#include "agentsched/base/log.h"
#include "agentsched/serve/svc.h"
#include "fuzz_json.h"
#include "fuzz_svc.h"

static svc *fuzz_svc;
static score_policy *fuzz_policies[2]; /* the default; shortlist: 2 */

#define FUZZ_SHORTLIST 2

static void check(bool ok, const char *what, const char *verb)
{
    if (!ok) {
        fprintf(stderr, "fuzz_extender: %s: %s\n", verb, what);
        abort();
    }
}

/* add_names adds every string in arr to set. */
static void add_names(json_t *set, const json_t *arr)
{
    size_t i;
    json_t *n;
    json_array_foreach(arr, i, n) if (json_is_string(n))
        json_object_setn(set, json_string_value(n), json_string_length(n), json_true());
}

/* request_names collects into set every name the request could mean
 * (NodeNames, Nodes.items[].metadata.name), matching keys in any case as
 * Go does, and taking every key that matches: a superset is safe here. */
static void request_names(json_t *set, const json_t *obj, int depth)
{
    static const char *const path[] = {"Nodes", "items", "metadata", "name"};
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        if (depth == 0 && strcasecmp(key, "NodeNames") == 0) {
            add_names(set, v);
        } else if (strcasecmp(key, path[depth]) == 0) {
            if (depth == 3) {
                if (json_is_string(v))
                    json_object_setn(set, json_string_value(v), json_string_length(v), json_true());
            } else if (depth == 1) {
                size_t i;
                json_t *item;
                json_array_foreach(v, i, item) if (json_is_object(item))
                    request_names(set, item, 2);
            } else if (json_is_object(v)) {
                request_names(set, v, depth + 1);
            }
        }
    }
}

static bool known(const json_t *set, const char *name, size_t len)
{
    return json_object_getn(set, name, len) != NULL;
}

static void check_names(const json_t *ans, const json_t *set, bool filter, const char *verb)
{
    if (filter) {
        size_t i;
        json_t *n;
        json_array_foreach(json_object_get(ans, "NodeNames"), i, n)
            check(json_is_string(n) && known(set, json_string_value(n), json_string_length(n)),
                  "NodeNames has a name the request did not send", verb);
        static const char *const maps[] = {"FailedNodes", "FailedAndUnresolvableNodes"};
        for (int m = 0; m < 2; m++) {
            const char *key;
            size_t klen;
            json_t *why;
            json_object_keylen_foreach(json_object_get(ans, maps[m]), key, klen, why)
                check(known(set, key, klen) && json_is_string(why),
                      "a failed node the request did not send", verb);
        }
    } else {
        size_t i;
        json_t *hp;
        json_array_foreach(ans, i, hp)
        {
            json_t *h = json_object_get(hp, "Host");
            check(json_is_string(h) && known(set, json_string_value(h), json_string_length(h)),
                  "Host the request did not send", verb);
            check(json_is_integer(json_object_get(hp, "Score")), "Score is not an integer", verb);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct {
        const char *name;
        http_handler_fn fn;
    } verbs[] = {{"filter", extender_handle_filter},
                 {"prioritize", extender_handle_prioritize},
                 {"preempt", extender_handle_preempt}};
    fuzz_svc_once(&fuzz_svc, AGENTSCHED_SOURCE_DIR "/test/unit/data/extender/cluster.yaml",
                  "fuzz_extender");
    if (!fuzz_policies[0]) {
        static const char text[] = "extender: {shortlist: 2}\n";
        as_diag d = {{0}, {0}};
        if (score_policy_new_default(&fuzz_svc->core->reg, &fuzz_policies[0]) != AS_OK ||
            score_policy_parse(&fuzz_svc->core->reg, "fuzz", text, sizeof text - 1,
                               &fuzz_policies[1], &d) != AS_OK) {
            fprintf(stderr, "fuzz_extender: policies: %s\n", d.msg);
            abort();
        }
    }
    if (size < 1)
        return 0;
    int v = data[0] % 3;
    bool shortlisted = (data[0] / 3) & 1;
    core_policy_set(fuzz_svc->core, score_policy_ref(fuzz_policies[shortlisted]));
    const char *verb = verbs[v].name;
    size_t len = size - 1;
    char *body = malloc(len + 1);
    memcpy(body, data + 1, len);
    body[len] = '\0';
    http_request req = {.method = "POST",
                        .path = verb,
                        .body = body,
                        .body_len = len,
                        .pool = pool_new((size_t)16 << 20)};
    http_response resp = {.status = 200, .content_type = "application/json"};
    buf_init(&resp.body, (size_t)16 << 20);
    verbs[v].fn(fuzz_svc->ext, &req, &resp);

    check(resp.body.err == AS_OK, "response buffer error", verb);
    json_t *ans = json_loadb(resp.body.data ? resp.body.data : "", resp.body.len, 0, NULL);
    /* A node echoed verbatim (the Nodes form) may carry a lone surrogate
     * escape, which JSON's grammar allows and Go decodes to U+FFFD, and
     * jansson refuses: fuzz_extargs checks such spans. */
    if (!ans && has_surrogate_escape(resp.body.data, resp.body.len) &&
        has_surrogate_escape(body, len))
        goto done;
    check(ans != NULL, "answer is not JSON", verb);
    if (resp.status != 200) {
        check(resp.status >= 400 && resp.status < 600, "unexpected status", verb);
        check(json_is_string(json_object_get(ans, "error")), "error body without \"error\"", verb);
        check(json_is_string(json_object_get(ans, "field")), "error body without \"field\"", verb);
    } else if (v < 2) {
        check(v == 0 ? json_is_object(ans) : json_is_array(ans), "answer of the wrong type", verb);
        if (v == 0 && shortlisted) {
            const json_t *nodes = json_object_get(json_object_get(ans, "Nodes"), "items");
            check(json_array_size(json_object_get(ans, "NodeNames")) <= FUZZ_SHORTLIST &&
                      json_array_size(nodes) <= FUZZ_SHORTLIST,
                  "a shortlisted filter answered more nodes than its shortlist", verb);
        }
        /* duplicate keys: which one counts is the decoder's business (tested
         * elsewhere); skip the name check rather than guess */
        json_t *r = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
        if (json_is_object(r)) {
            json_t *set = json_object();
            request_names(set, r, 0);
            check_names(ans, set, v == 0, verb);
            json_decref(set);
        }
        json_decref(r);
    }
done:
    json_decref(ans);
    buf_free(&resp.body);
    pool_free(req.pool);
    free(body);
    return 0;
}

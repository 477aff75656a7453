/*
 * fuzz_extargs.c - libFuzzer target for the extender request decoders.
 *
 * Feeds every input to the ExtenderArgs, binding and preemption decoders.
 * Checks that successful decodes are consistent: names within the caps,
 * node spans inside the input and themselves valid JSON objects, no
 * duplicate names; failures always explain themselves. A Pod read off its
 * span (the extender's spec memo path) is the Pod its DOM gives. The JSON
 * layer underneath has its own target, fuzz_json.
 * Build: cmake -DAGENTSCHED_FUZZ=ON -DCMAKE_C_COMPILER=clang; run
 * ./fuzz_extargs -max_len=65536 test/unit/data/extender/(filter|...)/ * /.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/api/extargs.h"
#include "agentsched/model/skip.h"
#include "agentsched/model/pod.h"
#include "agentsched/model/registry.h"
#include "fuzz_json.h"

/* valid_json: 1 when jansson agrees the text is JSON (an object when
 * obj), 0 when it does not, -1 when it cannot tell (a number too big for
 * it stops its parse early). */
static int valid_json(const char *s, size_t n, bool obj)
{
    json_error_t je;
    json_t *j = json_loadb(s, n, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL, &je);
    if (!j)
        return json_error_code(&je) == json_error_numeric_overflow ? -1 : 0;
    int ok = !obj || json_is_object(j);
    json_decref(j);
    return ok;
}

static void check_args(const char *body, size_t len, const extargs_args *a)
{
    for (size_t i = 0; i < a->nnames; i++) {
        if (a->names[i].len > EXTARGS_MAX_NAME_LEN || !a->names[i].s)
            abort();
        if (a->names[i].hash != cache_name_hash(a->names[i].s, a->names[i].len))
            abort(); /* the node lookup trusts it */
        for (size_t j = 0; j < i && a->nnames < 64; j++)
            if (a->names[j].len == a->names[i].len &&
                memcmp(a->names[j].s, a->names[i].s, a->names[i].len) == 0)
                abort(); /* duplicates must be dropped */
    }
    for (size_t i = 0; i < a->nnodes; i++) {
        const extargs_node *n = &a->nodes[i];
        if (n->raw < body || n->raw + n->raw_len > body + len || n->raw_len < 2)
            abort();
        if (n->name.hash != cache_name_hash(n->name.s, n->name.len))
            abort();
        if (n->raw[0] != '{' || n->raw[n->raw_len - 1] != '}')
            abort();
        /* the echoed span must be a JSON object on its own (jansson
         * refuses a lone surrogate escape, which JSON's grammar allows) */
        if (valid_json(n->raw, n->raw_len, true) == 0 && !has_surrogate_escape(n->raw, n->raw_len))
            abort();
    }
    if (a->pod && !json_is_object(a->pod))
        abort();
}

/* fields_match_dom: on a spec memo hit the extender reads the Pod's kind,
 * metadata and status off its span (extargs_pod_fields,
 * model_pod_from_fields); whatever that builds, the DOM path
 * (extargs_parse_pod with the Pod rules, model_pod_from_json_spec) builds
 * too, the same pod. a: a lazy decode with a spec span. */
static void fields_match_dom(const extargs_args *lazy)
{
    static model_registry reg;
    static bool init;
    if (!init) {
        model_registry_init(&reg);
        init = true;
    }
    as_diag d;
    json_t *sdom = NULL;
    model_pod_spec *spec = NULL;
    if (json_parse_skip(lazy->pod_spec_raw, lazy->pod_spec_len, NULL, &sdom, &d) ||
        model_pod_spec_from_json(&reg, sdom, &spec, &d)) {
        if (sdom)
            json_decref(sdom);
        return; /* no spec to remember: the memo does not come into it */
    }
    json_decref(sdom);
    extargs_args a = *lazy;
    a.pod = NULL;
    model_pod_fields f;
    model_span keys[64], values[64];
    model_pod *fast = NULL, *dom = NULL;
    as_err fe = extargs_pod_fields(&a, &f, keys, values, 64)
                    ? model_pod_from_fields(&reg, &f, spec, &fast)
                    : AS_EUNSUPPORTED;
    if (fe != AS_OK && fe != AS_EUNSUPPORTED)
        abort();
    as_err de = extargs_parse_pod(&a, model_skip_pod(), &d);
    if (!de)
        de = model_pod_from_json_spec(&reg, a.pod, spec, &dom, &d);
    if (fe == AS_OK) {
        if (de != AS_OK)
            abort(); /* the fields path took what the DOM refuses */
        if (strcmp(fast->name, dom->name) || strcmp(fast->ns, dom->ns) ||
            strcmp(fast->uid, dom->uid) || strcmp(fast->resource_version, dom->resource_version) ||
            fast->labels.n != dom->labels.n || fast->terminating != dom->terminating ||
            fast->created_ms != dom->created_ms || fast->phase != dom->phase ||
            fast->spec != dom->spec)
            abort();
        for (uint32_t i = 0; i < fast->labels.n; i++)
            if (strcmp(fast->labels.items[i].key, dom->labels.items[i].key) ||
                strcmp(fast->labels.items[i].value, dom->labels.items[i].value))
                abort();
    }
    model_pod_free(fast);
    model_pod_free(dom);
    if (a.pod)
        json_decref(a.pod);
    model_pod_spec_unref(spec);
}

/* projection_matches_dom: the extender's spec memo is keyed by the spec's
 * projection through the Pod rules (json_project); whenever there is
 * one, it is no longer than the spec and parses to exactly what the
 * builder makes of the spec under those rules, so equal keys mean equal
 * decoded specs. */
static void projection_matches_dom(const extargs_args *a)
{
    const json_skip *rules = model_skip_pod();
    size_t n = a->pod_spec_len, klen = 0;
    char *key = malloc(n ? n : 1);
    if (!key)
        abort();
    if (json_project(a->pod_spec_raw, n, rules, "spec", key, n, &klen)) {
        if (klen > n)
            abort();
        /* the spec as the builder places it: under the member "spec" */
        char *wrapped = malloc(n + 16);
        if (!wrapped)
            abort();
        int w = snprintf(wrapped, n + 16, "{\"spec\":%.*s}", (int)n, a->pod_spec_raw);
        json_t *built = NULL, *proj = NULL;
        as_diag d;
        if (json_parse_skip(wrapped, (size_t)w, rules, &built, &d) != AS_OK)
            abort(); /* projected what the builder refuses */
        if (json_parse_skip(key, klen, NULL, &proj, &d) != AS_OK)
            abort(); /* the projection is not JSON */
        if (!json_equal(proj, json_object_get(built, "spec")))
            abort();
        json_decref(proj);
        json_decref(built);
        free(wrapped);
    }
    free(key);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;
    as_diag d;

    pool *p = pool_new((size_t)16 << 20);
    extargs_args a;
    memset(&d, 0, sizeof d);
    /* The lazy decode plus extargs_parse_pod accepts exactly what the eager
     * decode accepts, and its Pod span is a JSON object inside the body. */
    bool lazy_ok = extargs_decode_args_ex(p, body, size, EXTARGS_LAZY_POD, &a, &d) == AS_OK;
    if (lazy_ok) {
        if (a.pod)
            abort(); /* lazy: no DOM yet */
        if (a.pod_raw && (a.pod_raw < body || a.pod_raw + a.pod_raw_len > body + size ||
                          a.pod_raw[0] != '{' || a.pod_raw[a.pod_raw_len - 1] != '}'))
            abort();
        if (a.pod_spec_raw) {
            fields_match_dom(&a);
            projection_matches_dom(&a);
        }
        /* What the extender builds: the Pod without the members the pod
         * model never reads. Whatever the whole build accepts, it accepts. */
        const json_skip *rules = model_skip_pod();
        extargs_args b = a;
        b.pod = NULL;
        bool skip_ok = extargs_parse_pod(&b, rules, &d) == AS_OK;
        lazy_ok = extargs_parse_pod(&a, NULL, &d) == AS_OK;
        if (lazy_ok && !skip_ok)
            abort();
        /* extargs_parse_pod walks the validated span instead of running
         * yajl over it again: the same acceptance and the same trees, with
         * and without rules (strings with surrogate escapes aside: a lone
         * one decodes to U+FFFD there, to '?' in yajl). */
        if (a.pod_raw) {
            json_t *y = NULL, *ys = NULL;
            as_diag yd;
            bool y_ok = json_parse_ref(a.pod_raw, a.pod_raw_len, NULL, &y, &yd) == AS_OK;
            bool ys_ok = json_parse_ref(a.pod_raw, a.pod_raw_len, rules, &ys, &yd) == AS_OK;
            bool sur = has_surrogate_escape(a.pod_raw, a.pod_raw_len);
            if (!sur && (y_ok != lazy_ok || ys_ok != skip_ok))
                abort();
            if (!sur && ((y_ok && !json_equal(y, a.pod)) || (ys_ok && !json_equal(ys, b.pod))))
                abort();
            /* the spec span (the key of decoded specs) is the DOM's spec */
            if (a.pod_spec_raw) {
                json_t *sp = NULL;
                if (a.pod_spec_raw < a.pod_raw ||
                    a.pod_spec_raw + a.pod_spec_len > a.pod_raw + a.pod_raw_len ||
                    a.pod_spec_raw[0] != '{' || a.pod_spec_raw[a.pod_spec_len - 1] != '}')
                    abort();
                bool sp_ok =
                    json_parse_ref(a.pod_spec_raw, a.pod_spec_len, NULL, &sp, &yd) == AS_OK;
                if (lazy_ok && !sur && (!sp_ok || !json_equal(sp, json_object_get(a.pod, "spec"))))
                    abort();
                json_decref(sp);
            }
            if (y)
                json_decref(y);
            if (ys)
                json_decref(ys);
        }
        if (b.pod)
            json_decref(b.pod);
        extargs_args_release(&a);
    }
    pool_free(p);
    p = pool_new((size_t)16 << 20);
    memset(&d, 0, sizeof d);
    bool eager_ok = extargs_decode_args(p, body, size, &a, &d) == AS_OK;
    if (eager_ok != lazy_ok)
        abort();
    if (eager_ok) {
        check_args(body, size, &a);
        sched_name *names;
        size_t n;
        size_t *idx;
        if (extargs_eval_names(p, &a, &names, &n, &idx) == AS_OK) {
            if (n > a.nnames + a.nnodes)
                abort();
            for (size_t j = 0; idx && j < a.nnodes; j++)
                if (idx[j] >= n || names[idx[j]].len != a.nodes[j].name.len)
                    abort();
        }
        extargs_args_release(&a);
        /* accepted something that is not JSON (jansson refuses a lone
         * surrogate escape, which JSON's grammar allows: see above) */
        if (valid_json(body, size, true) == 0 && !has_surrogate_escape(body, size))
            abort();
    } else if (!d.msg[0]) {
        abort();
    } else if (strstr(d.msg, "malformed JSON") && valid_json(body, size, false) == 1 &&
               !memchr(body, '\0', size)) {
        abort(); /* rejected valid JSON as malformed */
    }
    pool_free(p);

    p = pool_new((size_t)16 << 20);
    extargs_binding b;
    memset(&d, 0, sizeof d);
    if (extargs_decode_binding(p, body, size, &b, &d) == AS_OK) {
        if (!b.pod_name[0] || !b.node[0] || !b.pod_namespace[0])
            abort();
    } else if (!d.msg[0]) {
        abort();
    }
    pool_free(p);

    p = pool_new((size_t)16 << 20);
    extargs_preemption pr;
    memset(&d, 0, sizeof d);
    if (extargs_decode_preemption(p, body, size, &pr, &d) == AS_OK) {
        for (size_t i = 0; i < pr.nentries; i++)
            for (size_t k = 0; k < pr.entries[i].npods; k++)
                if (!pr.entries[i].uids[k])
                    abort();
        extargs_preemption_release(&pr);
    } else if (!d.msg[0]) {
        abort();
    }
    pool_free(p);
    return 0;
}

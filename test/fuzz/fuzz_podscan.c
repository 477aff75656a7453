/* fuzz_podscan.c - libFuzzer target for the pod watch's scanner pass
 * (model/podscan): it accepts exactly the JSON values the validating
 * scanner accepts and stops where it stops; a plain brief's spans lie in
 * the text, its digest is never 0, and a pod built from it carries the
 * brief's name and namespace. A pod the watch builds from its fields and
 * its spec decoded apart (model_pod_fields_read, model_pod_from_fields) is
 * the pod the watch's decode gives. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/json.h"
#include "agentsched/model/podscan.h"
#include "agentsched/model/skip.h"
#include "fuzz_json.h"
#include "fuzz_registry.h"

static void in_text(const model_span *sp, const char *b, size_t n)
{
    if (sp->s && (sp->s < b || sp->s + sp->len > b + n))
        abort();
}

static bool same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* fields_vs_decode: the watch's two ways to a pod agree (see the top). */
static void fields_vs_decode(model_registry *reg, const char *b, size_t n,
                             const model_pod_brief *br)
{
    if (!br->spec.s || has_surrogate_escape(b, n))
        return; /* jansson refuses a lone surrogate the scanner takes */
    json_t *o = NULL;
    as_diag d = {{0}, {0}};
    model_pod_fields f;
    model_span keys[8], values[8];
    if (json_parse_skip(b, n, model_skip_pod_watch(), &o, &d) != AS_OK) {
        /* The builder refuses what the grammar allows (a number out of
         * range). In the spec, the watch's memo can hold nothing for it
         * (the text it remembers was built; a projection refuses it);
         * anywhere else, the fields path must refuse it too. */
        json_t *so = NULL;
        if (json_parse_skip(br->spec.s, br->spec.len, NULL, &so, &d) == AS_OK &&
            model_pod_fields_read(b, n, br->spec.s, br->spec.s + br->spec.len, &f, keys, values, 8))
            abort();
        json_decref(so);
        return;
    }
    model_pod_spec *spec = NULL;
    model_pod *fast = NULL, *dom = NULL;
    if (model_pod_spec_from_json(reg, json_object_get(o, "spec"), &spec, &d) != AS_OK ||
        !model_pod_fields_read(b, n, br->spec.s, br->spec.s + br->spec.len, &f, keys, values, 8))
        goto done;
    f.node_name = &br->node_name;
    if (model_pod_from_fields(reg, &f, spec, &fast) != AS_OK)
        goto done;
    if (model_pod_from_json(reg, o, &dom, &d) != AS_OK)
        abort(); /* the fields path took what the decode refuses */
    if (strcmp(fast->name, dom->name) || strcmp(fast->ns, dom->ns) || strcmp(fast->uid, dom->uid) ||
        strcmp(fast->resource_version, dom->resource_version) ||
        !same_str(fast->node_name, dom->node_name) ||
        !same_str(fast->scheduler_name, dom->scheduler_name) || fast->labels.n != dom->labels.n ||
        fast->terminating != dom->terminating || fast->created_ms != dom->created_ms ||
        fast->phase != dom->phase || fast->mirror != dom->mirror ||
        fast->annot_gpu_devices != dom->annot_gpu_devices ||
        fast->annot_gpu_milli != dom->annot_gpu_milli ||
        !same_str(fast->annot_gpu_node, dom->annot_gpu_node) || fast->priority != dom->priority ||
        memcmp(&fast->req, &dom->req, sizeof fast->req) != 0)
        abort();
    for (uint32_t i = 0; i < dom->labels.n; i++)
        if (strcmp(fast->labels.items[i].key, dom->labels.items[i].key) ||
            strcmp(fast->labels.items[i].value, dom->labels.items[i].value))
            abort();
done:
    model_pod_free(fast);
    model_pod_free(dom);
    model_pod_spec_unref(spec);
    json_decref(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    model_registry *reg = fuzz_registry_once(NULL);
    const char *b = (const char *)data;
    as_diag d1 = {{0}, {0}}, d2 = {{0}, {0}};
    jscan s = {.base = b, .p = b, .end = b + size, .diag = &d1};
    jscan v = {.base = b, .p = b, .end = b + size, .diag = &d2};
    model_pod_brief br;
    memset(&br, 0, sizeof br);
    int ok = model_podscan(&s, &br);
    if (ok != jscan_value(&v) || (ok && s.p != v.p))
        abort();
    if (!ok || !br.plain)
        return 0;
    const model_span *spans[] = {
        &br.uid,   &br.ns,  &br.name, &br.resource_version, &br.node_name, &br.scheduler_name,
        &br.phase, &br.spec};
    for (size_t i = 0; i < sizeof spans / sizeof spans[0]; i++)
        in_text(spans[i], b, size);
    if (model_pod_digest(reg, &br) == 0)
        abort();
    char key[512];
    (void)model_pod_brief_key(&br, key, sizeof key);
    model_pod *p = NULL;
    as_err err = model_pod_from_brief(&br, &p);
    if (err == AS_OK) {
        if (!p || (br.name.s && (strlen(p->name) != br.name.len ||
                                 memcmp(p->name, br.name.s, br.name.len) != 0)))
            abort();
        model_pod_free(p);
    } else if (p || (err != AS_EINVAL && err != AS_ENOMEM)) {
        abort();
    }
    fields_vs_decode(reg, b, (size_t)(s.p - b), &br);
    return 0;
}

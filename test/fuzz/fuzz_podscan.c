/* fuzz_podscan.c - libFuzzer target for the pod watch's scanner pass
 * (model/podscan): it accepts exactly the JSON values the validating
 * scanner accepts and stops where it stops; a plain brief's spans lie in
 * the text, its digest is never 0, and a pod built from it carries the
 * brief's name and namespace. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/model/podscan.h"
#include "fuzz_registry.h"

static void in_text(const model_span *sp, const char *b, size_t n)
{
    if (sp->s && (sp->s < b || sp->s + sp->len > b + n))
        abort();
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
        &br.uid,  &br.ns, &br.name, &br.resource_version, &br.node_name, &br.scheduler_name,
        &br.phase};
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
    return 0;
}

/*
 * test_specmemo.c - the Pod spec memo (specmemo.h): a spec is remembered
 * from its first miss, or its second in a memo made so, then found by its exact text and by its
 * projection (env and nodeName left out through model_skip_pod_spec_key), never under another
 * registry generation, and never for a text over the cap.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/model/pod.h"
#include "agentsched/model/registry.h"
#include "agentsched/model/skip.h"
#include "agentsched/model/specmemo.h"

#define SPEC(env, node)                                                                            \
    "{" node "\"schedulerName\":\"agent-scheduler\",\"containers\":[{\"name\":\"c\",\"env\":[{"    \
    "\"name\":\"ID\",\"value\":\"" env "\"}],\"resources\":{\"requests\":{\"cpu\":\"250m\"}}}]}"

static model_pod_spec *decode(const model_registry *reg, const char *text)
{
    json_error_t je;
    json_t *o = json_loads(text, 0, &je);
    cr_assert_not_null(o, "%s", je.text);
    model_pod_spec *spec = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(model_pod_spec_from_json(reg, o, &spec, &d), AS_OK, "%s", d.msg);
    json_decref(o);
    return spec;
}

/* find looks text up with a scratch of its own size; the caller frees
 * *scratch after any put. */
static model_pod_spec *find(model_specmemo *m, int gen, const char *text, model_specmemo_keys *k,
                            char **scratch)
{
    size_t len = strlen(text);
    *scratch = malloc(len);
    return model_specmemo_find(m, gen, text, len, model_skip_pod_spec_key(), *scratch, len, k);
}

/* miss_and_put misses text, then remembers its decode when admitted;
 * returns whether it was. */
static bool miss_and_put(model_specmemo *m, const model_registry *reg, const char *text)
{
    model_specmemo_keys k;
    char *scratch;
    cr_assert_null(find(m, model_registry_count(reg), text, &k, &scratch), "%s", text);
    model_pod_spec *spec = decode(reg, text);
    model_specmemo_put(m, &k, spec);
    model_pod_spec_unref(spec);
    free(scratch);
    return k.admit;
}

Test(specmemo, remembered_from_the_second_miss_found_by_text_and_projection)
{
    model_registry reg;
    model_registry_init(&reg);
    model_specmemo *m;
    cr_assert_eq(model_specmemo_new(true, &m), AS_OK);
    int gen = model_registry_count(&reg);
    const char *a = SPEC("1", "");
    cr_assert_not(miss_and_put(m, &reg, a), "a first miss is not remembered");
    cr_assert(miss_and_put(m, &reg, a), "the second is");
    model_specmemo_keys k;
    char *scratch;
    model_pod_spec *hit = find(m, gen, a, &k, &scratch);
    cr_assert_not_null(hit, "by its text");
    free(scratch);
    /* another env and a nodeName: the same projection, the same spec */
    model_pod_spec *hit2 = find(m, gen, SPEC("2", "\"nodeName\":\"n7\","), &k, &scratch);
    cr_assert_eq(hit2, hit, "by its projection");
    cr_assert_not_null(k.proj);
    free(scratch);
    model_pod_spec_unref(hit2);
    /* another request: not the same spec */
    const char *other = "{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{"
                        "\"cpu\":\"300m\"}}}]}";
    cr_assert_null(find(m, gen, other, &k, &scratch));
    free(scratch);
    /* a resource registered since: the same text may charge more */
    cr_assert_null(find(m, gen + 1, a, &k, &scratch));
    free(scratch);
    model_pod_spec_unref(hit);
    model_specmemo_free(m);
    model_registry_destroy(&reg);
}

Test(specmemo, specs_each_their_own_are_never_remembered)
{
    model_registry reg;
    model_registry_init(&reg);
    model_specmemo *m;
    cr_assert_eq(model_specmemo_new(true, &m), AS_OK);
    char text[256];
    for (int i = 0; i < 300; i++) {
        snprintf(text, sizeof text,
                 "{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"%dm\""
                 "}}}]}",
                 100 + i);
        cr_assert_not(miss_and_put(m, &reg, text), "spec %d", i);
    }
    model_specmemo_free(m);
    model_registry_destroy(&reg);
}

Test(specmemo, text_over_the_cap_not_remembered)
{
    model_registry reg;
    model_registry_init(&reg);
    model_specmemo *m;
    cr_assert_eq(model_specmemo_new(true, &m), AS_OK);
    /* a 70 KiB image name: kept by the projection too */
    size_t n = 70u << 10;
    char *text = malloc(n + 200);
    int o = sprintf(text, "{\"containers\":[{\"name\":\"c\",\"image\":\"");
    memset(text + o, 'x', n);
    strcpy(text + o + n, "\"}]}");
    cr_assert_not(miss_and_put(m, &reg, text));
    cr_assert(miss_and_put(m, &reg, text), "admitted");
    model_specmemo_keys k;
    char *scratch;
    cr_assert_null(find(m, model_registry_count(&reg), text, &k, &scratch), "but not kept");
    free(scratch);
    free(text);
    model_specmemo_free(m);
    model_registry_destroy(&reg);
}

Test(specmemo, remembered_from_the_first_miss_unless_made_for_the_second)
{
    model_registry reg;
    model_registry_init(&reg);
    model_specmemo *m;
    cr_assert_eq(model_specmemo_new(false, &m), AS_OK);
    const char *a = SPEC("1", "");
    cr_assert(miss_and_put(m, &reg, a));
    model_specmemo_keys k;
    char *scratch;
    model_pod_spec *hit = find(m, model_registry_count(&reg), SPEC("2", ""), &k, &scratch);
    cr_assert_not_null(hit);
    model_pod_spec_unref(hit);
    free(scratch);
    model_specmemo_free(m);
    model_registry_destroy(&reg);
}

/*
 * test_gpushare.c - the GPU share advertiser's decision and patch body
 * (gpushare.h) as data: sequences of node states in
 * test/unit/data/gpushare/cases.json, each step with the action and the
 * merge patch expected.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/model/gpushare.h"

static const char *action_name(gpushare_action a)
{
    switch (a) {
    case GPUSHARE_NOOP:
        return "noop";
    case GPUSHARE_SET:
        return "set";
    case GPUSHARE_REMOVE:
        return "remove";
    case GPUSHARE_OPTED_OUT:
        return "opted_out";
    case GPUSHARE_STOOD_DOWN:
        return "stood_down";
    }
    return "?";
}

static json_t *node_of(const json_t *step)
{
    json_t *meta = json_pack("{s:s}", "name", "n1");
    json_t *ann = json_object_get(step, "annotations");
    if (ann)
        json_object_set(meta, "annotations", ann);
    return json_pack("{s:o,s:{s:O,s:O}}", "metadata", meta, "status", "capacity",
                     json_object_get(step, "capacity"), "allocatable",
                     json_object_get(step, "allocatable"));
}

Test(gpushare, cases)
{
    json_error_t je;
    json_t *root = json_load_file(TEST_DATA_DIR "/gpushare/cases.json", 0, &je);
    cr_assert_not_null(root, "%s", je.text);
    size_t i, j;
    const json_t *c, *step;
    json_array_foreach(json_object_get(root, "cases"), i, c)
    {
        const char *name = json_string_value(json_object_get(c, "name"));
        gpushare_state st;
        memset(&st, 0, sizeof st);
        json_array_foreach(json_object_get(c, "steps"), j, step)
        {
            json_t *node = node_of(step);
            cr_assert_not_null(node);
            gpushare_decision d;
            gpushare_decide(node, "nvidia.com/gpu", "agentsched.io/gpu-milli", &st,
                            json_integer_value(json_object_get(step, "now")), &d);
            const char *want = json_string_value(json_object_get(step, "action"));
            cr_expect_str_eq(action_name(d.action), want, "%s: step %zu", name, j);
            cr_expect_eq(d.newly_stood_down,
                         json_is_true(json_object_get(step, "newly_stood_down")), "%s: step %zu",
                         name, j);
            char *body = gpushare_patch_body("agentsched.io/gpu-milli", &d);
            const json_t *wp = json_object_get(step, "patch");
            if (!wp || json_is_null(wp)) {
                cr_expect_null(body, "%s: step %zu: unexpected patch %s", name, j, body);
            } else {
                cr_assert_not_null(body, "%s: step %zu: no patch", name, j);
                json_t *got = json_loads(body, 0, NULL);
                cr_expect(json_equal(got, wp), "%s: step %zu: patch %s", name, j, body);
                json_decref(got);
            }
            const json_t *wrote = json_object_get(step, "wrote");
            if (!wrote || json_is_true(wrote))
                gpushare_wrote(&st, &d);
            free(body);
            json_decref(node);
        }
    }
    json_decref(root);
}

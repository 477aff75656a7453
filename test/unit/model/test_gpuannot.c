/*
 * test_gpuannot.c - the device annotations (gpuannot.h) as data: the
 * device-list and milli grammars, the merge patch with its preconditions
 * (test/unit/data/gpuannot/patch.json), and what the pod decoder reads
 * back from a pod's annotations (pods.json).
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "agentsched/model/gpuannot.h"
#include "agentsched/model/pod.h"
#include "agentsched/model/registry.h"

#define DATA TEST_DATA_DIR "/gpuannot"

static json_t *load(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, DATA "/%s", name);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    cr_assert_not_null(j, "%s: %s", path, je.text);
    return j;
}

static uint32_t mask_of(const json_t *arr)
{
    uint32_t m = 0;
    size_t i;
    const json_t *v;
    json_array_foreach(arr, i, v) m |= 1u << json_integer_value(v);
    return m;
}

Test(gpuannot, grammars)
{
    json_t *j = load("parse.json");
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(j, "devices"), i, c)
    {
        const char *s = json_string_value(json_array_get(c, 0));
        uint32_t max = (uint32_t)json_integer_value(json_array_get(c, 1));
        const json_t *want = json_array_get(c, 2);
        uint32_t m = 0xdead;
        bool ok = gpuannot_parse_devices(s, strlen(s), max, &m);
        if (json_is_null(want)) {
            cr_expect(!ok, "devices \"%s\" (max %u) accepted as %#x", s, max, m);
            cr_expect_eq(m, 0xdead, "devices \"%s\": mask touched", s);
        } else {
            cr_expect(ok, "devices \"%s\" (max %u) refused", s, max);
            cr_expect_eq(m, (uint32_t)json_integer_value(want), "devices \"%s\": %#x", s, m);
        }
    }
    json_array_foreach(json_object_get(j, "milli"), i, c)
    {
        const char *s = json_string_value(json_array_get(c, 0));
        const json_t *want = json_array_get(c, 1);
        uint32_t v = 0;
        bool ok = gpuannot_parse_milli(s, strlen(s), &v);
        if (json_is_null(want))
            cr_expect(!ok, "milli \"%s\" accepted as %u", s, v);
        else
            cr_expect(ok && v == (uint32_t)json_integer_value(want), "milli \"%s\": %d %u", s, ok,
                      v);
    }
    json_array_foreach(json_object_get(j, "format"), i, c)
    {
        char out[GPUANNOT_DEVICES_MAX];
        uint32_t m = (uint32_t)json_integer_value(json_array_get(c, 0));
        const char *want = json_string_value(json_array_get(c, 1));
        cr_expect_eq(gpuannot_format_devices(m, out, sizeof out), strlen(want));
        cr_expect_str_eq(out, want);
        /* what is written reads back */
        uint32_t back = 0;
        if (m)
            cr_expect(gpuannot_parse_devices(out, strlen(out), 32, &back) && back == m, "%s", out);
    }
    json_array_foreach(json_object_get(j, "contracts"), i, c)
    {
        const char *s = json_string_value(json_array_get(c, 0));
        const json_t *want = json_array_get(c, 1);
        uint32_t bit = 0;
        as_err err = gpuannot_contract_parse(s, &bit);
        if (json_is_null(want)) {
            cr_expect_eq(err, AS_EINVAL, "contract \"%s\"", s);
        } else {
            cr_expect_eq(err, AS_OK, "contract \"%s\"", s);
            cr_expect_eq(bit, (uint32_t)json_integer_value(want));
            cr_expect_str_eq(gpuannot_contract_name(bit), s);
        }
    }
    /* a short buffer truncates at a whole index */
    char small[4];
    gpuannot_format_devices(0x7, small, sizeof small);
    cr_expect_str_eq(small, "0,1");
    json_decref(j);
}

Test(gpuannot, patch_bodies)
{
    json_t *cases = load("patch.json");
    size_t i;
    const json_t *c;
    json_array_foreach(cases, i, c)
    {
        const char *name = json_string_value(json_object_get(c, "name"));
        const json_t *in = json_object_get(c, "in");
        gpuannot_patch p = {
            .uid = json_string_value(json_object_get(in, "uid")),
            .resource_version = json_string_value(json_object_get(in, "resourceVersion")),
            .node = json_string_value(json_object_get(in, "node")),
            .devices = mask_of(json_object_get(in, "devices")),
            .milli = (uint32_t)json_integer_value(json_object_get(in, "milli")),
            .now_ns = json_integer_value(json_object_get(in, "nowNs")),
        };
        size_t k;
        const json_t *v;
        json_array_foreach(json_object_get(in, "contracts"), k, v)
        {
            uint32_t bit = 0;
            cr_assert_eq(gpuannot_contract_parse(json_string_value(v), &bit), AS_OK);
            p.contracts |= bit;
        }
        buf out;
        buf_init(&out, 1 << 16);
        as_err err = gpuannot_patch_body(&p, &out);
        if (json_object_get(c, "error")) {
            cr_expect_eq(err, AS_EINVAL, "%s: %s", name, as_strerror(err));
        } else {
            cr_expect_eq(err, AS_OK, "%s", name);
            json_error_t je;
            json_t *got = json_loadb(out.data, out.len, 0, &je);
            cr_expect_not_null(got, "%s: not JSON: %.*s", name, (int)out.len, out.data);
            cr_expect(json_equal(got, json_object_get(c, "out")), "%s: got %.*s", name,
                      (int)out.len, out.data);
            json_decref(got);
        }
        buf_free(&out);
    }
    json_decref(cases);
}

Test(gpuannot, pods_read_back)
{
    json_t *cases = load("pods.json");
    model_registry reg;
    model_registry_init(&reg);
    size_t i;
    const json_t *c;
    json_array_foreach(cases, i, c)
    {
        const char *name = json_string_value(json_object_get(c, "name"));
        json_t *pod = json_pack("{s:s, s:{s:s, s:s, s:s}, s:{s:s, s:[{s:s}]}}", "kind", "Pod",
                                "metadata", "name", "p", "namespace", "ns", "uid", "u", "spec",
                                "nodeName", "n", "containers", "name", "c");
        const json_t *an = json_object_get(c, "annotations");
        if (!json_is_null(an))
            json_object_set(json_object_get(pod, "metadata"), "annotations", (json_t *)an);
        model_pod *p = NULL;
        as_diag d = {{0}, {0}};
        cr_assert_eq(model_pod_from_json(&reg, pod, &p, &d), AS_OK, "%s: %s", name, d.msg);
        const json_t *want = json_object_get(c, "want");
        if (json_is_null(want)) {
            cr_expect_eq(p->annot_gpu_devices, 0, "%s", name);
            cr_expect_eq(p->annot_gpu_milli, 0, "%s", name);
            cr_expect_null(p->annot_gpu_node, "%s", name);
        } else {
            cr_expect_eq(p->annot_gpu_devices, mask_of(json_object_get(want, "devices")), "%s",
                         name);
            cr_expect_eq(p->annot_gpu_milli,
                         (uint32_t)json_integer_value(json_object_get(want, "milli")), "%s", name);
            cr_expect_str_eq(p->annot_gpu_node, json_string_value(json_object_get(want, "node")),
                             "%s", name);
        }
        model_pod_free(p);
        json_decref(pod);
    }
    model_registry_destroy(&reg);
    json_decref(cases);
}

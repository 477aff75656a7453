/* test_registry.c - resource names, fixed indexes and interning. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "agentsched/model/registry.h"

static model_registry reg;

static void setup(void)
{
    model_registry_init(&reg);
}
static void teardown(void)
{
    model_registry_destroy(&reg);
}

TestSuite(registry, .init = setup, .fini = teardown);

Test(registry, fixed_and_intern)
{
    cr_assert_eq(model_registry_count(&reg), MODEL_RES_FIRST_EXTENDED);
    cr_assert_eq(model_registry_lookup(&reg, "cpu", 3), MODEL_RES_CPU);
    cr_assert_eq(model_registry_lookup(&reg, "memory", 6), MODEL_RES_MEMORY);
    cr_assert_eq(model_registry_lookup(&reg, "ephemeral-storage", 17), MODEL_RES_EPHEMERAL);
    cr_assert_eq(model_registry_lookup(&reg, "pods", 4), MODEL_RES_PODS);
    cr_assert_eq(model_registry_lookup(&reg, "cp", 2), -1);
    cr_assert_eq(model_registry_lookup(&reg, "cpux", 3), MODEL_RES_CPU, "length, not NUL");
    cr_assert_eq(reg.gpu_res, -1);
    cr_assert_str_eq(reg.gpu_name, "nvidia.com/gpu");
    cr_assert_str_eq(reg.gpu_share_name, "agentsched.io/gpu-milli");
    cr_assert_str_eq(reg.gpu_model_label, "agentsched.io/gpu-model");

    int idx = -1;
    cr_assert_eq(model_registry_intern(&reg, "example.com/foo", 15, &idx), AS_OK);
    cr_assert_eq(idx, MODEL_RES_FIRST_EXTENDED);
    int again = -1;
    cr_assert_eq(model_registry_intern(&reg, "example.com/foo", 15, &again), AS_OK);
    cr_assert_eq(again, idx);
    cr_assert_eq(model_registry_intern(&reg, "nvidia.com/gpu", 14, &idx), AS_OK);
    cr_assert_eq(reg.gpu_res, idx);
    cr_assert_str_eq(model_registry_name(&reg, idx), "nvidia.com/gpu");
    cr_assert_str_eq(model_registry_name(&reg, 99), "");
}

Test(registry, limits)
{
    char longname[MODEL_RES_NAME_MAX + 8];
    memset(longname, 'a', sizeof longname);
    int idx;
    cr_assert_eq(model_registry_intern(&reg, longname, MODEL_RES_NAME_MAX, &idx), AS_EINVAL);
    cr_assert_eq(model_registry_intern(&reg, "", 0, &idx), AS_EINVAL);
    for (int i = MODEL_RES_FIRST_EXTENDED; i < MODEL_MAX_RES; i++) {
        char name[32];
        int n = snprintf(name, sizeof name, "example.com/r%d", i);
        cr_assert_eq(model_registry_intern(&reg, name, (size_t)n, &idx), AS_OK);
        cr_assert_eq(idx, i);
    }
    cr_assert_eq(model_registry_intern(&reg, "example.com/full", 16, &idx), AS_ELIMIT);
    /* existing names still resolve when full */
    cr_assert_eq(model_registry_intern(&reg, "example.com/r5", 14, &idx), AS_OK);
    cr_assert_eq(idx, 5);
}

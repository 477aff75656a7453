/* test_gpu.c - GPU device choice on per-device usage: best fit for shares,
 * free devices for whole GPUs, and no choice when nothing fits. */
#include <criterion/criterion.h>

#include "agentsched/core/gpu.h"
#include "agentsched/model/node.h"
#include "agentsched/model/pod.h"

Test(gpu, no_demand_takes_nothing)
{
    int32_t used[2] = {1000, 1000};
    uint32_t dev = 7;
    cr_assert(gpu_choose(0, 0, used, 2, &dev));
    cr_expect_eq(dev, 0);
}

Test(gpu, whole_gpus_take_free_devices)
{
    int32_t used[4] = {0, 500, 0, 1000};
    uint32_t dev = 0;
    cr_assert(gpu_choose(2, 0, used, 4, &dev));
    cr_expect_eq(dev, (1u << 0) | (1u << 2));
    cr_expect_not(gpu_choose(3, 0, used, 4, &dev));
    cr_expect_eq(dev, 0);
}

Test(gpu, a_share_takes_the_tightest_device_that_holds_it)
{
    int32_t used[4] = {0, 700, 200, 600};
    uint32_t dev = 0;
    cr_assert(gpu_choose(1, 300, used, 4, &dev));
    cr_expect_eq(dev, 1u << 1);
    cr_assert(gpu_choose(1, 400, used, 4, &dev));
    cr_expect_eq(dev, 1u << 3);
    cr_expect_not(gpu_choose(1, MODEL_GPU_MILLI + 1, used, 4, &dev));
}

Test(gpu, more_devices_than_the_node_has_never_fit)
{
    int32_t used[MODEL_MAX_GPUS] = {0};
    uint32_t dev = 0;
    cr_expect_not(gpu_choose(3, 0, used, 2, &dev));
    cr_assert(gpu_choose(MODEL_MAX_GPUS, 0, used, MODEL_MAX_GPUS, &dev));
    cr_expect_eq(dev, (1u << MODEL_MAX_GPUS) - 1);
}

/* Levels of 1/64 of the devices' milli, floored: all free is the top
 * level, one milli used drops a level, nothing without devices. */
Test(gpu, free_level_steps_by_a_64th_of_the_devices)
{
    cr_expect_eq(gpu_free_level(2000, 2), GPU_FREE_LEVELS);
    cr_expect_eq(gpu_free_level(1999, 2), GPU_FREE_LEVELS - 1);
    cr_expect_eq(gpu_free_level(1000, 2), GPU_FREE_LEVELS / 2);
    cr_expect_eq(gpu_free_level(31, 2), 0u, "under 1/64 of 2000");
    cr_expect_eq(gpu_free_level(32, 2), 1u);
    cr_expect_eq(gpu_free_level(0, 0), 0u);
    cr_expect_eq(gpu_free_level(4392000, 4392), GPU_FREE_LEVELS, "openb's G2 devices");
}

Test(gpu, device_free_stays_within_one_device)
{
    cr_expect_eq(gpu_device_free(0), MODEL_GPU_MILLI);
    cr_expect_eq(gpu_device_free(300), 700u);
    cr_expect_eq(gpu_device_free(MODEL_GPU_MILLI), 0u);
    cr_expect_eq(gpu_device_free(1200), 0u, "overcommitted");
    cr_expect_eq(gpu_device_free(-5), MODEL_GPU_MILLI, "never above a device");
}

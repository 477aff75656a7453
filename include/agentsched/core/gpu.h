/*
 * gpu.h - GPU device choice on a node's per-device usage.
 *
 * Works on plain per-device usage arrays (milli-GPU in use per device), so
 * both the cache (counting a bound pod) and the predicates (can it fit?)
 * choose devices the same way without depending on each other.
 */
#ifndef AGENTSCHED_GPU_H
#define AGENTSCHED_GPU_H

#include <stdbool.h>
#include <stdint.h>

/*
 * gpu_choose picks count devices among the first ngpus entries of used
 * (milli-GPU in use per device, each read with a relaxed atomic load since
 * the cache's writer may update them concurrently): whole GPUs (milli 0)
 * take fully free devices; a share of milli takes the device with the least
 * free milli that still holds it (best fit, leaving big holes whole); a
 * share never spans devices. Returns false when impossible; *devices gets
 * the bitmask (0 when count is 0). ngpus must be at most 32.
 */
bool gpu_choose(uint32_t count, uint32_t milli, const int32_t *used, uint32_t ngpus,
                uint32_t *devices);

/* gpu_device_free is the milli-GPU free on a device with `used` milli in
 * use: 1000 - used, never below 0 (an overcommitted device has none) nor
 * above 1000. */
uint32_t gpu_device_free(int32_t used);

/*
 * gpu_free_level is the free-capacity level of `devices` devices with
 * free_milli milli-GPU free on them: free_milli over devices x 1000,
 * floored to steps of 1/GPU_FREE_LEVELS (GPU_FREE_LEVELS when all is free,
 * 0 without devices). The cache moves its device version whenever the
 * level of all devices or of a GPU model's changes, so a score that reads
 * levels, not the milli themselves, is current while that version stays.
 */
#define GPU_FREE_LEVELS 64
uint32_t gpu_free_level(uint64_t free_milli, uint64_t devices);

#endif

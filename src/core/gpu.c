/* gpu.c - GPU device choice (best fit on per-device usage). */
#include "agentsched/core/gpu.h"

#include "agentsched/model/pod.h"

/* See gpu.h. */
bool gpu_choose(uint32_t count, uint32_t milli, const int32_t *used, uint32_t ngpus,
                uint32_t *devices)
{
    *devices = 0;
    if (!count)
        return true;
    int32_t need = (int32_t)(milli ? milli : MODEL_GPU_MILLI);
    if (need > MODEL_GPU_MILLI || count > ngpus)
        return false;
    /* Best fit: take devices with the least free capacity that still hold
     * the share, so whole devices stay whole for whole-GPU pods. */
    uint32_t chosen = 0;
    for (uint32_t k = 0; k < count; k++) {
        int best = -1;
        int32_t best_free = 0;
        for (uint32_t d = 0; d < ngpus; d++) {
            if (chosen & (1u << d))
                continue;
            int32_t free_milli = MODEL_GPU_MILLI - __atomic_load_n(&used[d], __ATOMIC_RELAXED);
            if (free_milli >= need && (best < 0 || free_milli < best_free)) {
                best = (int)d;
                best_free = free_milli;
            }
        }
        if (best < 0)
            return false;
        chosen |= 1u << best;
    }
    *devices = chosen;
    return true;
}

/* See gpu.h. */
uint32_t gpu_device_free(int32_t used)
{
    return used >= MODEL_GPU_MILLI ? 0 : (uint32_t)(MODEL_GPU_MILLI - (used > 0 ? used : 0));
}

/* See gpu.h. */
uint32_t gpu_free_level(uint64_t free_milli, uint64_t devices)
{
    return devices ? (uint32_t)(free_milli * GPU_FREE_LEVELS / (devices * MODEL_GPU_MILLI)) : 0;
}

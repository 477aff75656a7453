/* registry.c - resource name <-> vector index registry. */
#include "agentsched/model/registry.h"

#include <stdio.h>
#include <string.h>

static const char *const fixed_names[MODEL_RES_FIRST_EXTENDED] = {
    [MODEL_RES_CPU] = "cpu",
    [MODEL_RES_MEMORY] = "memory",
    [MODEL_RES_EPHEMERAL] = "ephemeral-storage",
    [MODEL_RES_PODS] = "pods",
};

/* See registry.h. */
void model_registry_init(model_registry *reg)
{
    memset(reg, 0, sizeof *reg);
    for (int i = 0; i < MODEL_RES_FIRST_EXTENDED; i++)
        snprintf(reg->names[i], sizeof reg->names[i], "%s", fixed_names[i]);
    reg->n = MODEL_RES_FIRST_EXTENDED;
    reg->gpu_res = -1;
    snprintf(reg->gpu_name, sizeof reg->gpu_name, "%s", "nvidia.com/gpu");
    snprintf(reg->gpu_share_name, sizeof reg->gpu_share_name, "%s", "agentsched.io/gpu-milli");
    snprintf(reg->gpu_model_label, sizeof reg->gpu_model_label, "%s", "agentsched.io/gpu-model");
    pthread_mutex_init(&reg->mu, NULL);
}

/* See registry.h. */
void model_registry_destroy(model_registry *reg)
{
    pthread_mutex_destroy(&reg->mu);
}

/* See registry.h. */
int model_registry_lookup(const model_registry *reg, const char *name, size_t len)
{
    if (len >= MODEL_RES_NAME_MAX)
        return -1;
    /* Names below the published count are immutable (written before the
     * release store of n), so no lock is needed. */
    int n = __atomic_load_n(&reg->n, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++) {
        if (reg->names[i][len] == '\0' && memcmp(reg->names[i], name, len) == 0)
            return i;
    }
    return -1;
}

/* See registry.h. */
as_err model_registry_intern(model_registry *reg, const char *name, size_t len, int *idx)
{
    if (len == 0 || len >= MODEL_RES_NAME_MAX || memchr(name, '\0', len))
        return AS_EINVAL;
    int i = model_registry_lookup(reg, name, len);
    if (i >= 0) {
        *idx = i;
        return AS_OK;
    }
    as_err err = AS_OK;
    pthread_mutex_lock(&reg->mu);
    /* another writer may have added it between the lookup and the lock */
    i = model_registry_lookup(reg, name, len);
    if (i < 0) {
        int n = reg->n;
        if (n >= MODEL_MAX_RES) {
            err = AS_ELIMIT;
            goto done;
        }
        memcpy(reg->names[n], name, len);
        reg->names[n][len] = '\0';
        i = n;
        if (strcmp(reg->names[n], reg->gpu_name) == 0)
            __atomic_store_n(&reg->gpu_res, n, __ATOMIC_RELEASE);
        __atomic_store_n(&reg->n, n + 1, __ATOMIC_RELEASE);
    }
    *idx = i;
done:
    pthread_mutex_unlock(&reg->mu);
    return err;
}

/* See registry.h. */
int model_registry_count(const model_registry *reg)
{
    return __atomic_load_n(&reg->n, __ATOMIC_ACQUIRE);
}

/* See registry.h. */
const char *model_registry_name(const model_registry *reg, int i)
{
    if (i < 0 || i >= model_registry_count(reg))
        return "";
    return reg->names[i];
}

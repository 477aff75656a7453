/*
 * registry.h - the resource registry: resource names to vector indexes.
 *
 * Resources are dense vectors indexed through a model_registry: cpu, memory,
 * ephemeral-storage and pods have fixed indexes; extended resources
 * (nvidia.com/gpu, example.com/foo) are interned when a *node* advertises
 * them. A pod that requests a resource no node has gets `unknown_res` set
 * instead (it can fit nowhere), so hostile pods cannot fill the registry.
 *
 * Units: cpu in millicores, everything else in base units (bytes, count).
 */
#ifndef AGENTSCHED_MODEL_REGISTRY_H
#define AGENTSCHED_MODEL_REGISTRY_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"

#define MODEL_MAX_RES      16 /* distinct resource names, fixed ones included */
#define MODEL_RES_NAME_MAX 128

/* Fixed resource indexes. */
enum {
    MODEL_RES_CPU = 0,
    MODEL_RES_MEMORY = 1,
    MODEL_RES_EPHEMERAL = 2,
    MODEL_RES_PODS = 3,
    MODEL_RES_FIRST_EXTENDED = 4,
};

/* A resource vector: v[r] is the amount of the registry's resource r. */
typedef struct model_resvec {
    int64_t v[MODEL_MAX_RES];
} model_resvec;

/*
 * model_registry maps resource names to vector indexes and holds the GPU
 * configuration. Lookups are lock-free (names are written once, before `n`
 * is published with release order); interning takes `mu`. One per service.
 */
typedef struct model_registry {
    char names[MODEL_MAX_RES][MODEL_RES_NAME_MAX];
    int n;                             /* published count; access with __atomic */
    pthread_mutex_t mu;                /* serialises interning */
    int gpu_res;                       /* index of the whole-GPU resource, -1 until a node has it */
    char gpu_name[MODEL_RES_NAME_MAX]; /* default "nvidia.com/gpu" */
    char gpu_share_name[MODEL_RES_NAME_MAX];  /* default "agentsched.io/gpu-milli" */
    char gpu_model_label[MODEL_RES_NAME_MAX]; /* default "agentsched.io/gpu-model" */
} model_registry;

/* model_registry_init fills the fixed resources and GPU defaults. */
void model_registry_init(model_registry *reg);

/* model_registry_destroy releases the mutex. */
void model_registry_destroy(model_registry *reg);

/* model_registry_lookup returns the index of name[0..len) or -1. Lock-free. */
int model_registry_lookup(const model_registry *reg, const char *name, size_t len);

/* model_registry_intern returns the index of name, adding it if new.
 * AS_ELIMIT when MODEL_MAX_RES names exist already; AS_EINVAL if too long. */
as_err model_registry_intern(model_registry *reg, const char *name, size_t len, int *idx);

/* model_registry_count returns the number of names (acquire load). */
int model_registry_count(const model_registry *reg);

/* model_registry_name returns the name of index i (borrowed; valid forever). */
const char *model_registry_name(const model_registry *reg, int i);

#endif

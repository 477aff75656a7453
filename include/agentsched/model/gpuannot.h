/*
 * gpuannot.h - the GPU devices a pod got, written on the pod as
 * annotations (docs/gpu.md): the text of each annotation, the JSON merge
 * patch that writes them before the Binding, and the decoder the pod model
 * reads them back with.
 *
 * Contracts (which annotations a patch carries; the policy's
 * gpu.annotations lists them):
 *   agentsched  agentsched.io/gpu-devices  "0,2": device indexes,
 *                                          ascending, decimal, no spaces
 *               agentsched.io/gpu-milli    "600": milli-GPU taken on each
 *                                          of them, 1..1000 (1000: whole)
 *               agentsched.io/gpu-node     the node they are on
 *   volcano     volcano.sh/gpu-index       "0,2", as Volcano's gpushare
 *                                          and volcano-sh/devices' device
 *                                          plugin read it
 *               volcano.sh/predicate-time  the patch's wall clock in
 *                                          nanoseconds since the epoch
 *                                          (the plugin serves pending pods
 *                                          oldest first)
 * Only the agentsched contract is read back: the cache rebuilds a bound
 * pod's devices from it when all three are present and well formed and
 * the node is the one the pod is bound to.
 */
#ifndef AGENTSCHED_MODEL_GPUANNOT_H
#define AGENTSCHED_MODEL_GPUANNOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/buf.h"
#include "agentsched/base/error.h"

#define GPUANNOT_DEVICES       "agentsched.io/gpu-devices"
#define GPUANNOT_MILLI         "agentsched.io/gpu-milli"
#define GPUANNOT_NODE          "agentsched.io/gpu-node"
#define GPUANNOT_VOLCANO_INDEX "volcano.sh/gpu-index"
#define GPUANNOT_VOLCANO_TIME  "volcano.sh/predicate-time"

/* Contract bits (a set of them is a uint32_t mask). */
#define GPUANNOT_AGENTSCHED (1u << 0)
#define GPUANNOT_VOLCANO    (1u << 1)
#define GPUANNOT_ALL        (GPUANNOT_AGENTSCHED | GPUANNOT_VOLCANO)

/* The longest device list: "0,1,...,31". */
#define GPUANNOT_DEVICES_MAX 96

/* gpuannot_contract_parse maps "agentsched" / "volcano" to its bit;
 * AS_EINVAL for any other name (bit untouched). */
as_err gpuannot_contract_parse(const char *name, uint32_t *bit);

/* gpuannot_contract_name is the name of one bit ("?" for others). */
const char *gpuannot_contract_name(uint32_t bit);

/* gpuannot_format_devices writes the device list of mask (bit d: device
 * d) into out ("" for 0); cap of GPUANNOT_DEVICES_MAX always suffices.
 * Returns the length written. */
size_t gpuannot_format_devices(uint32_t mask, char *out, size_t cap);

/* gpuannot_parse_devices reads a device list s[0..len): one or more
 * decimal indexes below max_devices (at most 32), no sign, no leading
 * zero but "0", strictly ascending, separated by single commas. false for
 * anything else (mask untouched). */
bool gpuannot_parse_devices(const char *s, size_t len, uint32_t max_devices, uint32_t *mask);

/* gpuannot_parse_milli reads 1..1000 in decimal (no sign, no leading
 * zero); false otherwise. */
bool gpuannot_parse_milli(const char *s, size_t len, uint32_t *milli);

/* What a patch writes. */
typedef struct gpuannot_patch {
    const char *uid;              /* precondition: metadata.uid; "" or NULL: none */
    const char *resource_version; /* precondition: metadata.resourceVersion; "" or NULL: none */
    const char *node;             /* the node of the Binding that follows */
    uint32_t devices;             /* mask, not 0 */
    uint32_t milli;               /* per device, 1..1000 */
    uint32_t contracts;           /* GPUANNOT_* bits; 0 writes no annotation */
    int64_t now_ns;               /* wall clock, for volcano.sh/predicate-time */
} gpuannot_patch;

/*
 * gpuannot_patch_body appends to out the JSON merge patch
 * (application/merge-patch+json) that writes p's annotations with p's
 * preconditions:
 *   {"metadata":{"uid":U,"resourceVersion":RV,"annotations":{...}}}
 * The API server answers 409 Conflict when the resourceVersion is not the
 * pod's current one and refuses a uid that is not the pod's (the pod was
 * deleted and created again under its name). AS_EINVAL for no devices, a
 * milli outside 1..1000 or no node; AS_ENOMEM when out is full.
 */
as_err gpuannot_patch_body(const gpuannot_patch *p, buf *out);

#endif

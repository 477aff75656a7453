/*
 * policy.h - the scoring policy YAML loader.
 *
 * Builds a score_policy (score.h) from a policy file, every field
 * validated, and applies the GPU resource names it configures to the
 * registry. Loading has no side effects on the registry, so a rejected
 * reload leaves the running policy untouched. Format: policy/default.yaml.
 */
#ifndef AGENTSCHED_POLICY_H
#define AGENTSCHED_POLICY_H

#include <stddef.h>

#include "agentsched/base/error.h"
#include "agentsched/core/score.h"
#include "agentsched/model/registry.h"

/*
 * score_policy_load reads a policy YAML file. Every field is validated;
 * unknown keys are errors. diag names the file and the field.
 */
as_err score_policy_load(model_registry *reg, const char *path, score_policy **out, as_diag *diag);

/* score_policy_parse is score_policy_load on text[0..len) already in
 * memory; `name` stands for the file in messages. */
as_err score_policy_parse(model_registry *reg, const char *name, const char *text, size_t len,
                          score_policy **out, as_diag *diag);

/* score_policy_apply_gpu_names copies the policy's GPU names into reg. Call
 * once at start-up, before any node is decoded: AS_ECONFLICT when reg
 * already has a GPU resource and the names differ (loading never changes
 * the registry; a reload that renames GPUs is rejected by the loader). */
as_err score_policy_apply_gpu_names(const score_policy *p, model_registry *reg);

#endif

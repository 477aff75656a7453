/*
 * skip.h - which members of a Node or Pod object the model's decoders
 * never read, as rule tables for the JSON builder (struct json_skip):
 * the watch decodes its events and list pages with them, and the
 * extender builds the Pod of filter and prioritize with the pod table.
 *
 * On a real API server the skipped members are most of an object's bytes
 * (managedFields on every object; kubelet's container statuses; a node's
 * image list), and every member built is a malloc and a free. The tables
 * live next to the decoders (model_pod_from_json, model_node_from_json)
 * because they are the decoders' promise: a decoder that starts reading
 * one of these members must take it out of its table here.
 */
#ifndef AGENTSCHED_MODEL_SKIP_H
#define AGENTSCHED_MODEL_SKIP_H

struct json_skip;

/* model_skip_pod returns the rule table for a v1 Pod: static, ends with a
 * rule whose parent is NULL, never NULL. Thread-safe. */
const struct json_skip *model_skip_pod(void);

/* model_skip_pod_watch is model_skip_pod keeping metadata.annotations
 * (less kubectl's last-applied-configuration): the watch's table, for the
 * device annotations of bound pods (model_pod annot_gpu_*). The extender's
 * pods are pending: it keeps model_skip_pod, so they never carry them. */
const struct json_skip *model_skip_pod_watch(void);

/* model_skip_pod_spec_key is the rules for a Pod spec's projection as a
 * key of decoded specs less their nodeName (json_project with parent
 * "spec"): model_skip_pod's for the spec and its containers, plus
 * nodeName, which the watch carries apart so that the pods of one
 * template bound to different nodes share one decoded spec. */
const struct json_skip *model_skip_pod_spec_key(void);

/* model_skip_node returns the rule table for a v1 Node, as model_skip_pod. */
const struct json_skip *model_skip_node(void);

#endif

/*
 * gpu_share_advertiser.h - `agentsched gpu-share-advertiser`: lists and
 * watches Nodes and keeps the GPU share resource (agentsched.io/gpu-milli)
 * in every GPU node's status.capacity and status.allocatable at devices x
 * 1000 (the decision in model/gpushare.h).
 */
#ifndef AGENTSCHED_CMD_GPU_SHARE_ADVERTISER_H
#define AGENTSCHED_CMD_GPU_SHARE_ADVERTISER_H

/* gpu_share_advertiser_cli_main is `agentsched gpu-share-advertiser`
 * (argv[0] is the command name). Returns the process exit status. */
int gpu_share_advertiser_cli_main(int argc, char **argv);

#endif

/*
 * shard_controller.h - `agentsched shard-controller`: runs the sharding
 * engine of shardctl.h against the API server (watches, config hot reload,
 * Lease, NodeShard writes), or offline on a cluster file with --once.
 */
#ifndef AGENTSCHED_CMD_SHARD_CONTROLLER_H
#define AGENTSCHED_CMD_SHARD_CONTROLLER_H

/* shard_controller_cli_main is `agentsched shard-controller` (argv[0] is
 * the command name). Returns the process exit status. */
int shard_controller_cli_main(int argc, char **argv);

#endif

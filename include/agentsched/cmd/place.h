/*
 * place.h - `agentsched place`: dry-run placement from the command line,
 * offline against a cluster file or through a running server's
 * POST /v1/placements (placement.h evaluates; this prints).
 */
#ifndef AGENTSCHED_CMD_PLACE_H
#define AGENTSCHED_CMD_PLACE_H

/*
 * place_cli_main is `agentsched place` (argv[0] is the command name):
 *   place --cluster FILE -f PODS [--candidates K] [--policy FILE] [-o table|json]
 *   place --server URL  -f PODS [--candidates K] [-o table|json] [--timeout S]
 *         [--cacert FILE] [--cert FILE --key FILE]
 * Returns the process exit status: 0 on success (unplaceable pods are
 * reported, not failures), 1 on an evaluation / connection / server error,
 * 2 on a usage error.
 */
int place_cli_main(int argc, char **argv);

#endif

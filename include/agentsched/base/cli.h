/*
 * cli.h - helpers the command-line parsers share (serve, place, replay,
 * shard-controller): "did you mean" distances and getopt's refusals worded
 * with the option's real name.
 */
#ifndef AGENTSCHED_CLI_H
#define AGENTSCHED_CLI_H

#include <getopt.h>
#include <stddef.h>

/* cli_distance is the edit (Levenshtein) distance of a and b, for "did you
 * mean" hints; 64 when either is longer than 63 bytes. */
size_t cli_distance(const char *a, const char *b);

/* cli_refused_option words the option getopt_long just refused (it
 * returned c, '?' or ':') into buf (n bytes) and returns buf: "-z" for a
 * short option inside a cluster (-zq; argv[optind - 1] is not it), a long
 * one by its full name without =VALUE ("--timeout needs a value",
 * "--help takes no value", "unknown flag --x", "ambiguous flag --c: spell
 * it out"). lo and shortopts are the ones given to getopt_long; noun is
 * what the command calls its options ("option", "flag"). Reads optind and
 * optopt, so call it at once. */
const char *cli_refused_option(int c, const struct option *lo, const char *shortopts,
                               const char *noun, char **argv, char *buf, size_t n);

#endif

/*
 * cli.h - the command-line parser every command shares (serve, place,
 * replay, shard-controller, gpu-share-advertiser, version).
 *
 * A command describes its flags in a table. cli_next walks argv and hands
 * the command one flag and its value at a time, so that each command keeps
 * its own checks of values and its own messages for them; what is wrong
 * with the command line itself (an unknown flag, a missing value, a value
 * given to a boolean, a stray argument) is refused here, worded the same
 * for every command. cli_usage prints --help from the same table, so a new
 * flag cannot be accepted without being listed, and cli_step answers
 * --help with it, so every command answers it the same way.
 */
#ifndef AGENTSCHED_CLI_H
#define AGENTSCHED_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "agentsched/base/error.h"

/* One flag of a command. */
typedef struct cli_flag {
    int id;              /* the command's own value, for its switch */
    const char *name;    /* long name with its dashes: "--listen" */
    char short_name;     /* 'f' for -f; 0 when there is none */
    const char *metavar; /* what the value is, "HOST:PORT"; NULL: a boolean */
    /* One or more lines, '\n' between them. NULL hides the flag: it is
     * accepted by its whole name, but neither listed, nor abbreviated, nor
     * offered as a hint (a flag kept for old command lines, or one not
     * ready to be documented). */
    const char *help;
} cli_flag;

/* One command's command line. */
typedef struct cli_spec {
    const char *command;  /* "serve": messages begin "agentsched serve: " */
    const char *synopsis; /* --help's text before "Flags:", blank line included */
    const char *epilogue; /* --help's text after the flags, or NULL */
    const cli_flag *flags;
    size_t nflags;
    /* Accept an unambiguous prefix of a long name (--time for --timeout),
     * as getopt_long does; without it only whole names are flags, so that
     * adding a flag never turns a command line that worked into an
     * ambiguous one. */
    bool abbrev;
} cli_spec;

/* Where cli_next is in argv. Set up with cli_parser_init; the fields are
 * cli_next's own. */
typedef struct cli_parser {
    const cli_spec *spec;
    int argc;
    char **argv;
    int next;            /* index of the next word of argv */
    const char *cluster; /* the rest of a short-flag cluster (-zq), or NULL */
    bool ended;          /* "--" was seen: no flags follow */
} cli_parser;

/* cli_parser_init sets p up to walk argv[1..argc) (argv[0] is the command
 * name) against spec; argv and spec must outlive p. */
void cli_parser_init(cli_parser *p, const cli_spec *spec, int argc, char **argv);

/*
 * cli_next hands out the next flag of the command line: *flag is its table
 * entry and *value its value (NULL for a boolean); *flag is NULL once argv
 * is done. Accepted forms: --name VALUE, --name=VALUE, -x VALUE, -xVALUE,
 * -x=VALUE (as kubectl takes it), clusters of short booleans (-ab), the
 * unambiguous prefix of a long name where spec->abbrev allows it, and "--"
 * to end the flags. Values are taken as they come, even when they begin
 * with '-' or are empty. Returns AS_EINVAL, with d->msg the sentence to
 * show (without the command's name), for an unknown flag (with the closest
 * listed name when one is near), an ambiguous prefix, a missing value, a
 * value given to a boolean or an argument that is not a flag; p must not
 * be used after that.
 */
as_err cli_next(cli_parser *p, const cli_flag **flag, const char **value, as_diag *d);

/* The exit statuses of every command: success (--help included), a
 * failure while running, a command line refused. */
enum { CLI_EXIT_OK = 0, CLI_EXIT_FAIL = 1, CLI_EXIT_USAGE = 2 };

/* What cli_step found. */
enum { CLI_REFUSED = -1, CLI_END = 0, CLI_FLAG = 1, CLI_HELP = 2 };

/*
 * cli_step is cli_next for a command's flag loop: what cli_next refuses it
 * shows through cli_refuse, and the flag named "--help" it answers itself
 * with cli_usage on stdout. Returns CLI_FLAG with *flag (and *value) set
 * for the command to handle, CLI_END at the end of the flags, CLI_HELP
 * after the help (exit with CLI_EXIT_OK) and CLI_REFUSED after a refusal
 * (exit with CLI_EXIT_USAGE). A command's loop:
 *
 *     while ((r = cli_step(&p, &fl, &v)) == CLI_FLAG)
 *         switch (fl->id) { ... }
 *     if (r != CLI_END)
 *         return r == CLI_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
 */
int cli_step(cli_parser *p, const cli_flag **flag, const char **value);

/* cli_refuse prints msg (a refusal of cli_next or the command's own) to
 * stderr as "agentsched COMMAND: msg" with a line pointing to --help. */
void cli_refuse(const cli_spec *spec, const char *msg);

/* cli_print_flags prints the listed flags of flags[0..n) one to a row,
 * indented by two: "-f, --filename PODS" or "--cluster FILE", then the help
 * in a column one wider than the widest of these, at most 26 characters
 * wide; a wider one has its help on the next line, and the help's further
 * lines are indented to the column. */
void cli_print_flags(FILE *f, const cli_flag *flags, size_t n);

/* cli_usage prints spec's --help: its synopsis, "Flags:" with the table
 * (cli_print_flags), and its epilogue after a blank line. */
void cli_usage(FILE *f, const cli_spec *spec);

/* cli_distance is the edit (Levenshtein) distance of a and b, for "did you
 * mean" hints; 64 when either is longer than 63 bytes. */
size_t cli_distance(const char *a, const char *b);

#endif

/* test_cli.c - the shared command-line parser: which flags and values an
 * argv yields, how each mistake is refused (cli_step included), and the
 * generated Flags: list. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentsched/base/cli.h"

enum {
    T_CLUSTER,
    T_CANDIDATES,
    T_FILENAME,
    T_OUTPUT,
    T_OUTPUT_DIR,
    T_ONCE,
    T_VERBOSE,
    T_QUIET,
    T_LEGACY,
    T_HELP,
};

static const cli_flag test_flags[] = {
    {T_CLUSTER, "--cluster", 0, "FILE", "a cluster file"},
    {T_CANDIDATES, "--candidates", 0, "K", "candidates, 1..16"},
    {T_FILENAME, "--filename", 'f', "PODS", "the pods"},
    {T_OUTPUT, "--output", 'o', "FMT", "table or json"},
    {T_OUTPUT_DIR, "--output-dir", 0, "DIR", "where to write"},
    {T_ONCE, "--once", 0, NULL, "run once"},
    {T_VERBOSE, "--verbose", 'v', NULL, "say more"},
    {T_QUIET, "--quiet", 'q', NULL, "say less"},
    {T_LEGACY, "--legacy", 0, NULL, NULL},
    {T_HELP, "--help", 'h', NULL, "show this help"},
};

static const cli_spec exact_spec = {
    .command = "test",
    .synopsis = "Usage: agentsched test [FLAGS]\n\n",
    .flags = test_flags,
    .nflags = sizeof test_flags / sizeof test_flags[0],
};

static const cli_spec abbrev_spec = {
    .command = "test",
    .synopsis = "Usage: agentsched test [FLAGS]\n\n",
    .flags = test_flags,
    .nflags = sizeof test_flags / sizeof test_flags[0],
    .abbrev = true,
};

/* One command line and what parsing it gives: the flags in order, each as
 * NAME or NAME=VALUE, then "! MESSAGE" when it is refused. */
typedef struct parse_case {
    const char *args[6]; /* after the command name; NULL-terminated */
    const char *want;
} parse_case;

/* Parses args against spec into out as parse_case.want spells it. */
static void parse(const cli_spec *spec, const char *const *args, char *out, size_t n)
{
    char *argv[8] = {(char *)"test"};
    int argc = 1;
    while (args[argc - 1])
        argv[argc] = (char *)args[argc - 1], argc++;
    cli_parser p;
    cli_parser_init(&p, spec, argc, argv);
    size_t used = 0;
    out[0] = '\0';
    for (;;) {
        const cli_flag *fl = NULL;
        const char *value = NULL;
        as_diag d = {0};
        as_err err = cli_next(&p, &fl, &value, &d);
        const char *sep = used ? " " : "";
        if (err != AS_OK) {
            cr_assert_eq(err, AS_EINVAL);
            snprintf(out + used, n - used, "%s! %s", sep, d.msg);
            return;
        }
        if (!fl)
            return;
        cr_assert_eq(fl->metavar == NULL, value == NULL, "%s: value iff metavar", fl->name);
        int w = snprintf(out + used, n - used, "%s%s%s%s", sep, fl->name, value ? "=" : "",
                         value ? value : "");
        used += (size_t)w;
        cr_assert_lt(used, n);
    }
}

static void run_cases(const cli_spec *spec, const parse_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char got[512];
        parse(spec, cases[i].args, got, sizeof got);
        cr_expect_str_eq(got, cases[i].want, "case %zu: got \"%s\", want \"%s\"", i, got,
                         cases[i].want);
    }
}

Test(cli, accepts_every_form_of_flag_and_value)
{
    static const parse_case cases[] = {
        {{NULL}, ""},
        {{"--cluster", "c.yaml", NULL}, "--cluster=c.yaml"},
        {{"--cluster=c.yaml", NULL}, "--cluster=c.yaml"},
        {{"--cluster=a=b", NULL}, "--cluster=a=b"},
        {{"--cluster=", NULL}, "--cluster="},
        {{"--cluster", "", NULL}, "--cluster="},
        {{"--cluster", "-v", NULL}, "--cluster=-v"},
        {{"-f", "p.yaml", NULL}, "--filename=p.yaml"},
        {{"-fp.yaml", NULL}, "--filename=p.yaml"},
        {{"-o=json", NULL}, "--output=json"},
        {{"-vq", NULL}, "--verbose --quiet"},
        {{"-vf", "p.yaml", NULL}, "--verbose --filename=p.yaml"},
        {{"-vfp.yaml", "-q", NULL}, "--verbose --filename=p.yaml --quiet"},
        {{"--once", "--legacy", "-h", NULL}, "--once --legacy --help"},
        {{"--output", "json", "--output-dir", "d", NULL}, "--output=json --output-dir=d"},
        {{"--once", "--", NULL}, "--once"},
        {{"--", NULL}, ""},
    };
    run_cases(&exact_spec, cases, sizeof cases / sizeof cases[0]);
}

Test(cli, refuses_mistakes_naming_them)
{
    static const parse_case cases[] = {
        {{"--clustr", "c", NULL}, "! unknown flag '--clustr'; did you mean '--cluster'?"},
        {{"--clustr=c", NULL}, "! unknown flag '--clustr'; did you mean '--cluster'?"},
        {{"--cand", "3", NULL}, "! unknown flag '--cand'; did you mean '--candidates'?"},
        {{"--outp", NULL}, "! unknown flag '--outp'; did you mean '--output'?"},
        {{"--zzzzzzzz", NULL}, "! unknown flag '--zzzzzzzz'"},
        {{"--legac", NULL}, "! unknown flag '--legac'"},
        {{"--cluster", NULL}, "! --cluster needs a value: --cluster FILE"},
        {{"--once", "-f", NULL}, "--once ! -f needs a value: -f PODS"},
        {{"-vf", NULL}, "--verbose ! -f needs a value: -f PODS"},
        {{"--once=1", NULL}, "! --once takes no value; drop the '=1'"},
        {{"--help=", NULL}, "! --help takes no value; drop the '='"},
        {{"-z", NULL}, "! unknown flag '-z'"},
        {{"-vzq", NULL}, "--verbose ! unknown flag '-z'"},
        {{"-\xc3\xa9", NULL}, "! unknown flag '-\xc3\xa9'"},
        {{"-cluster", "c", NULL}, "! unknown flag '-cluster'; did you mean '--cluster'?"},
        {{"-once=1", NULL}, "! unknown flag '-once'; did you mean '--once'?"},
        {{"x", NULL}, "! unexpected argument 'x' (test takes only flags)"},
        {{"once", NULL},
         "! unexpected argument 'once' (test takes only flags); did you mean "
         "'--once'?"},
        {{"-", NULL}, "! unexpected argument '-' (test takes only flags)"},
        {{"--once", "x", "--bogus", NULL},
         "--once ! unexpected argument 'x' (test takes only "
         "flags)"},
        {{"--", "--once", NULL}, "! unexpected argument '--once' (test takes only flags)"},
    };
    run_cases(&exact_spec, cases, sizeof cases / sizeof cases[0]);
}

Test(cli, abbreviations_where_the_command_takes_them)
{
    static const parse_case cases[] = {
        {{"--cand", "3", NULL}, "--candidates=3"},
        {{"--cand=3", NULL}, "--candidates=3"},
        {{"--on", NULL}, "--once"},
        {{"--output", "json", NULL}, "--output=json"},
        {{"--cl", NULL}, "! --cluster needs a value: --cluster FILE"},
        {{"--on=1", NULL}, "! --once takes no value; drop the '=1'"},
        {{"--c", "x", NULL}, "! ambiguous flag '--c' (--cluster, --candidates): spell it out"},
        {{"--outp=x", NULL}, "! ambiguous flag '--outp' (--output, --output-dir): spell it out"},
        {{"--legac", NULL}, "! unknown flag '--legac'"},
        {{"--clustr", NULL}, "! unknown flag '--clustr'; did you mean '--cluster'?"},
    };
    run_cases(&abbrev_spec, cases, sizeof cases / sizeof cases[0]);
}

Test(cli, refusal_quotes_a_long_word_cut)
{
    char word[400], got[512];
    memset(word, 'x', sizeof word - 1);
    word[0] = word[1] = '-';
    word[sizeof word - 1] = '\0';
    const char *args[] = {word, NULL};
    parse(&exact_spec, args, got, sizeof got);
    cr_assert(strncmp(got, "! unknown flag '--xxx", 21) == 0, "%s", got);
    cr_assert_lt(strlen(got), 200);
    cr_assert_eq(got[strlen(got) - 1], '\'', "%s", got);

    /* Cut between characters, never inside one: "\xc3\xa9" is 'e' with an
     * acute accent, two bytes. */
    size_t o = 0;
    word[o++] = '-';
    word[o++] = '-';
    word[o++] = 'x';
    while (o + 2 < sizeof word) {
        word[o++] = '\xc3';
        word[o++] = '\xa9';
    }
    word[o] = '\0';
    parse(&exact_spec, args, got, sizeof got);
    const char *end = strrchr(got, '\'');
    cr_assert_not_null(end);
    cr_assert_eq((unsigned char)end[-1], 0xa9, "%s", got);
}

Test(cli, step_hands_out_flags_then_ends_or_refuses)
{
    char *ok[] = {(char *)"test", (char *)"--once", (char *)"-f", (char *)"pods.yaml"};
    cli_parser p;
    cli_parser_init(&p, &exact_spec, 4, ok);
    const cli_flag *fl = NULL;
    const char *v = NULL;
    cr_assert_eq(cli_step(&p, &fl, &v), CLI_FLAG);
    cr_expect_eq(fl->id, T_ONCE);
    cr_assert_eq(cli_step(&p, &fl, &v), CLI_FLAG);
    cr_expect_eq(fl->id, T_FILENAME);
    cr_expect_str_eq(v, "pods.yaml");
    cr_expect_eq(cli_step(&p, &fl, &v), CLI_END);
    cr_expect_null(fl);

    /* The refusal goes to stderr; the caller only learns to stop. */
    char *bad[] = {(char *)"test", (char *)"--nope"};
    cli_parser_init(&p, &exact_spec, 2, bad);
    cr_expect_eq(cli_step(&p, &fl, &v), CLI_REFUSED);
}

/* --help is answered by cli_step (the usage on stdout), so no command
 * handles it; what comes before it is still checked, what follows is not
 * read. */
Test(cli, step_answers_help_itself)
{
    char *help[] = {(char *)"test", (char *)"--once", (char *)"-h", (char *)"--nope"};
    cli_parser p;
    cli_parser_init(&p, &exact_spec, 4, help);
    const cli_flag *fl = NULL;
    const char *v = NULL;
    cr_assert_eq(cli_step(&p, &fl, &v), CLI_FLAG);
    cr_expect_eq(fl->id, T_ONCE);
    /* stdout into a file for the one call (by descriptor: the TSan
     * build's Criterion stand-in has no redirection) */
    FILE *tmp = tmpfile();
    cr_assert_not_null(tmp);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    cr_assert_geq(saved, 0);
    dup2(fileno(tmp), STDOUT_FILENO);
    int r = cli_step(&p, &fl, &v);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    cr_expect_eq(r, CLI_HELP);
    char out[4096];
    rewind(tmp);
    size_t n = fread(out, 1, sizeof out - 1, tmp);
    fclose(tmp);
    out[n] = '\0';
    cr_expect_not_null(strstr(out, "Flags:\n"), "%s", out);
    cr_expect_not_null(strstr(out, "--filename PODS"), "%s", out);

    char *late[] = {(char *)"test", (char *)"--nope", (char *)"--help"};
    cli_parser_init(&p, &exact_spec, 3, late);
    cr_expect_eq(cli_step(&p, &fl, &v), CLI_REFUSED);
}

/* Returns what print writes, as a string the caller frees. */
static char *printed(void (*print)(FILE *, const cli_spec *), const cli_spec *spec)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    print(f, spec);
    fclose(f);
    return text;
}

Test(cli, usage_lists_flags_from_the_table)
{
    static const cli_flag flags[] = {
        {0, "--cluster", 0, "FILE", "a cluster file,\nread once"},
        {1, "--filename", 'f', "PODS", "the pods"},
        {2, "--hidden", 0, NULL, NULL},
        {3, "--a-very-long-flag-name", 0, "SECONDS", "wide: help below"},
        {4, "--help", 'h', NULL, "show this help"},
    };
    static const cli_spec spec = {
        .command = "test",
        .synopsis = "Usage: agentsched test\n\n",
        .epilogue = "Exit status: 0.\n",
        .flags = flags,
        .nflags = sizeof flags / sizeof flags[0],
    };
    char *text = printed(cli_usage, &spec);
    cr_expect_str_eq(text, "Usage: agentsched test\n"
                           "\n"
                           "Flags:\n"
                           "  --cluster FILE       a cluster file,\n"
                           "                       read once\n"
                           "  -f, --filename PODS  the pods\n"
                           "  --a-very-long-flag-name SECONDS\n"
                           "                       wide: help below\n"
                           "  -h, --help           show this help\n"
                           "\n"
                           "Exit status: 0.\n");
    free(text);
}

Test(cli, usage_column_stops_at_26)
{
    static const cli_flag flags[] = {
        {0, "--leader-elect-identity", 0, "ID", "26 wide"},
        {1, "--x", 0, NULL, "short"},
    };
    static const cli_spec spec = {
        .command = "test",
        .synopsis = "",
        .flags = flags,
        .nflags = sizeof flags / sizeof flags[0],
    };
    char *text = printed(cli_usage, &spec);
    cr_expect_str_eq(text, "Flags:\n"
                           "  --leader-elect-identity ID 26 wide\n"
                           "  --x                        short\n");
    free(text);
}

Test(cli, distance)
{
    cr_expect_eq(cli_distance("--listen", "--listen"), 0);
    cr_expect_eq(cli_distance("--lissten", "--listen"), 1);
    cr_expect_eq(cli_distance("", "abc"), 3);
    cr_expect_eq(cli_distance("kitten", "sitting"), 3);
    char big[70];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    cr_expect_eq(cli_distance(big, "a"), 64);
}

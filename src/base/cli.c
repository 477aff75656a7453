/* cli.c - the command-line parser every command shares (see cli.h). */
#include "agentsched/base/cli.h"

#include <string.h>

/* Words longer than this are cut in messages: as_diag's msg is bounded, and
 * the rest of the sentence must fit after them. */
#define CLI_QUOTE_MAX 96

/* How much of s[0..len) a message quotes: at most CLI_QUOTE_MAX bytes, and
 * never part of a UTF-8 character. */
static int quoted(const char *s, size_t len)
{
    return (int)as_utf8_excerpt(s, len, CLI_QUOTE_MAX);
}

/* A left column wider than this puts the help on the next line. */
#define CLI_HELP_COLUMN 26

/* See cli.h. */
size_t cli_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 64;
    size_t prev[64], cur[64];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, (lb + 1) * sizeof prev[0]);
    }
    return prev[lb];
}

/* See cli.h. */
void cli_parser_init(cli_parser *p, const cli_spec *spec, int argc, char **argv)
{
    memset(p, 0, sizeof *p);
    p->spec = spec;
    p->argc = argc;
    p->argv = argv;
    p->next = 1;
}

/* The listed long name to offer for the unknown name ("--lissten"): the
 * one name begins with when it is the only one (--in-cl for --in-cluster,
 * where abbreviations are not taken), else the closest within three edits
 * (further than that a hint is more noise than help), else NULL. */
static const char *closest_name(const cli_spec *s, const char *name)
{
    const char *best = NULL, *extends = NULL;
    size_t bestd = 4, nextends = 0, len = strlen(name);
    for (size_t i = 0; i < s->nflags; i++) {
        if (!s->flags[i].help)
            continue;
        if (len > 2 && strncmp(s->flags[i].name, name, len) == 0) {
            extends = s->flags[i].name;
            nextends++;
        }
        size_t d = cli_distance(name, s->flags[i].name);
        if (d < bestd) {
            bestd = d;
            best = s->flags[i].name;
        }
    }
    return nextends == 1 ? extends : best;
}

/* Refuses word: "unknown flag" when it looks like one, else "unexpected
 * argument"; either with the closest listed name when one is near. */
static as_err refuse_word(const cli_spec *s, const char *word, size_t len, bool is_flag, as_diag *d)
{
    char name[CLI_QUOTE_MAX + 3];
    int n = quoted(word, len);
    /* A bare word is compared as if it had its dashes ("listen" is near
     * "--listen"); a word with dashes after "--" or a short flag has no
     * long name to be near. */
    snprintf(name, sizeof name, "%s%.*s", is_flag ? "" : "--", n, word);
    bool hintable = is_flag ? strncmp(word, "--", 2) == 0 : word[0] != '-';
    const char *hint = hintable ? closest_name(s, name) : NULL;
    char tail[CLI_QUOTE_MAX + 32] = "";
    if (hint)
        snprintf(tail, sizeof tail, "; did you mean '%s'?", hint);
    if (is_flag)
        return as_diag_set(d, AS_EINVAL, NULL, "unknown flag '%.*s'%s", n, word, tail);
    return as_diag_set(d, AS_EINVAL, NULL, "unexpected argument '%.*s' (%s takes only flags)%s", n,
                       word, s->command, tail);
}

/* A single-dash word that spells a listed long name ("-listen") is that
 * flag mistyped, not a cluster of short flags. */
static bool is_single_dash_long(const cli_spec *s, const char *word)
{
    size_t len = strcspn(word, "=");
    for (size_t i = 0; len > 2 && i < s->nflags; i++) {
        const char *name = s->flags[i].name;
        if (s->flags[i].help && strlen(name) == len + 1 && strncmp(name + 1, word, len) == 0)
            return true;
    }
    return false;
}

static as_err missing_value(const char *shown, const cli_flag *fl, as_diag *d)
{
    return as_diag_set(d, AS_EINVAL, NULL, "%s needs a value: %s %s", shown, shown, fl->metavar);
}

/* Hands out the next flag of the short-flag cluster p->cluster points
 * into (-zq: 'z', then 'q'). */
static as_err next_short(cli_parser *p, const cli_flag **flag, const char **value, as_diag *d)
{
    const cli_spec *s = p->spec;
    char c = *p->cluster++;
    const cli_flag *fl = NULL;
    for (size_t i = 0; c && i < s->nflags; i++)
        if (s->flags[i].short_name == c)
            fl = &s->flags[i];
    if (!fl) {
        p->cluster = NULL;
        const char *word = p->argv[p->next - 1];
        /* Only a printable ASCII byte is quoted on its own: a byte of a
         * UTF-8 character would make the message invalid. */
        if ((unsigned char)c > ' ' && (unsigned char)c < 0x7f)
            return as_diag_set(d, AS_EINVAL, NULL, "unknown flag '-%c'", c);
        return refuse_word(s, word, strlen(word), true, d);
    }
    char shown[3] = {'-', c, '\0'};
    if (fl->metavar) {
        /* -oVALUE as getopt takes it, and -o=VALUE as kubectl does. */
        const char *rest = p->cluster[0] == '=' ? p->cluster + 1 : p->cluster;
        p->cluster = NULL;
        if (*rest)
            *value = rest;
        else if (p->next < p->argc)
            *value = p->argv[p->next++];
        else
            return missing_value(shown, fl, d);
    } else if (!*p->cluster) {
        p->cluster = NULL;
    }
    *flag = fl;
    return AS_OK;
}

/* Hands out the flag of word ("--name" or "--name=value"). */
static as_err next_long(cli_parser *p, const char *word, const cli_flag **flag, const char **value,
                        as_diag *d)
{
    const cli_spec *s = p->spec;
    const char *eq = strchr(word, '=');
    size_t len = eq ? (size_t)(eq - word) : strlen(word);
    const cli_flag *fl = NULL;
    for (size_t i = 0; !fl && i < s->nflags; i++)
        if (strlen(s->flags[i].name) == len && strncmp(s->flags[i].name, word, len) == 0)
            fl = &s->flags[i];
    if (!fl && s->abbrev) {
        char names[CLI_QUOTE_MAX * 2] = "";
        size_t matches = 0, used = 0;
        for (size_t i = 0; i < s->nflags; i++) {
            if (!s->flags[i].help || strncmp(s->flags[i].name, word, len) != 0)
                continue;
            fl = &s->flags[i];
            int w =
                snprintf(names + used, sizeof names - used, "%s%s", matches ? ", " : "", fl->name);
            if (w > 0 && (size_t)w < sizeof names - used)
                used += (size_t)w;
            matches++;
        }
        if (matches > 1)
            return as_diag_set(d, AS_EINVAL, NULL, "ambiguous flag '%.*s' (%s): spell it out",
                               quoted(word, len), word, names);
    }
    if (!fl)
        return refuse_word(s, word, len, true, d);
    if (!fl->metavar) {
        if (eq)
            return as_diag_set(d, AS_EINVAL, NULL, "%s takes no value; drop the '=%.*s'", fl->name,
                               quoted(eq + 1, strlen(eq + 1)), eq + 1);
    } else if (eq) {
        *value = eq + 1;
    } else if (p->next < p->argc) {
        *value = p->argv[p->next++];
    } else {
        return missing_value(fl->name, fl, d);
    }
    *flag = fl;
    return AS_OK;
}

/* See cli.h. */
as_err cli_next(cli_parser *p, const cli_flag **flag, const char **value, as_diag *d)
{
    *flag = NULL;
    *value = NULL;
    if (p->cluster)
        return next_short(p, flag, value, d);
    if (p->next >= p->argc)
        return AS_OK;
    const char *word = p->argv[p->next++];
    if (p->ended || word[0] != '-' || word[1] == '\0')
        return refuse_word(p->spec, word, strlen(word), false, d);
    if (word[1] == '-') {
        if (word[2] != '\0')
            return next_long(p, word, flag, value, d);
        p->ended = true;
        return cli_next(p, flag, value, d);
    }
    if (is_single_dash_long(p->spec, word)) {
        int n = (int)strcspn(word, "=");
        return as_diag_set(d, AS_EINVAL, NULL, "unknown flag '%.*s'; did you mean '-%.*s'?", n,
                           word, n, word);
    }
    p->cluster = word + 1;
    return next_short(p, flag, value, d);
}

/* See cli.h. */
int cli_step(cli_parser *p, const cli_flag **flag, const char **value)
{
    as_diag d = {0};
    if (cli_next(p, flag, value, &d) != AS_OK) {
        cli_refuse(p->spec, d.msg);
        return CLI_REFUSED;
    }
    if (!*flag)
        return CLI_END;
    if (strcmp((*flag)->name, "--help") == 0) {
        cli_usage(stdout, p->spec);
        return CLI_HELP;
    }
    return CLI_FLAG;
}

/* See cli.h. */
void cli_refuse(const cli_spec *spec, const char *msg)
{
    fprintf(stderr, "agentsched %s: %s\nRun 'agentsched %s --help' for the list of flags.\n",
            spec->command, msg, spec->command);
}

/* Writes fl's left column ("-f, --filename PODS") into buf; its length. */
static size_t flag_left(const cli_flag *fl, char *buf, size_t n)
{
    char short_form[5] = "";
    if (fl->short_name)
        snprintf(short_form, sizeof short_form, "-%c, ", fl->short_name);
    int w = snprintf(buf, n, "%s%s%s%s", short_form, fl->name, fl->metavar ? " " : "",
                     fl->metavar ? fl->metavar : "");
    return w < 0 ? 0 : (size_t)w;
}

/* See cli.h. */
void cli_print_flags(FILE *f, const cli_flag *flags, size_t n)
{
    char left[128];
    int width = 0;
    for (size_t i = 0; i < n; i++) {
        size_t w = flags[i].help ? flag_left(&flags[i], left, sizeof left) : 0;
        if (w <= CLI_HELP_COLUMN && (int)w > width)
            width = (int)w;
    }
    /* Two spaces before the help read better than one, where they fit. */
    if (width > 0 && width < CLI_HELP_COLUMN)
        width++;
    for (size_t i = 0; i < n; i++) {
        if (!flags[i].help)
            continue;
        size_t w = flag_left(&flags[i], left, sizeof left);
        if ((int)w > width)
            fprintf(f, "  %s\n  %-*s ", left, width, "");
        else
            fprintf(f, "  %-*s ", width, left);
        const char *line = flags[i].help;
        for (;;) {
            size_t len = strcspn(line, "\n");
            fprintf(f, "%.*s\n", (int)len, line);
            if (!line[len])
                break;
            line += len + 1;
            fprintf(f, "  %-*s ", width, "");
        }
    }
}

/* See cli.h. */
void cli_usage(FILE *f, const cli_spec *spec)
{
    fputs(spec->synopsis, f);
    fputs("Flags:\n", f);
    cli_print_flags(f, spec->flags, spec->nflags);
    if (spec->epilogue)
        fprintf(f, "\n%s", spec->epilogue);
}

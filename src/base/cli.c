/* cli.c - helpers the command-line parsers share (see cli.h). */
#include "agentsched/base/cli.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

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
const char *cli_refused_option(int c, const struct option *lo, const char *shortopts,
                               const char *noun, char **argv, char *buf, size_t n)
{
    const char *cur = argv[optind - 1];
    bool is_long = optopt == 0 || optopt >= 256 ||
                   (c == ':' ? strncmp(cur, "--", 2) == 0
                             : optopt != ':' && strchr(shortopts, optopt) != NULL);
    if (!is_long) {
        if (c == ':')
            snprintf(buf, n, "-%c needs a value", optopt);
        else
            snprintf(buf, n, "unknown %s -%c", noun, optopt);
        return buf;
    }
    for (const struct option *o = lo; optopt && o->name; o++)
        if (o->val == optopt) {
            snprintf(buf, n, c == ':' ? "--%s needs a value" : "--%s takes no value", o->name);
            return buf;
        }
    /* Unknown, or a prefix of several long options. */
    int len = (int)strcspn(cur, "="), matches = 0;
    for (const struct option *o = lo; len > 2 && o->name; o++)
        matches += strncmp(o->name, cur + 2, (size_t)len - 2) == 0;
    snprintf(buf, n, matches > 1 ? "ambiguous %s %.*s: spell it out" : "unknown %s %.*s", noun, len,
             cur);
    return buf;
}

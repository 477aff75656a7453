/*
 * fuzz_json.h - what the JSON fuzz targets share (each includes it once;
 * everything here is static).
 */
#ifndef AGENTSCHED_FUZZ_JSON_H
#define AGENTSCHED_FUZZ_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* has_surrogate_escape: a backslash-u escape of D800..DFFF occurs in
 * s[0..n) (or something that looks like one inside another escape: erring
 * towards skipping the comparison is fine). The walk decodes a lone one to
 * U+FFFD, as Go's encoding/json does; yajl's builder, held to strict UTF-8,
 * refuses the bytes it makes of it. The walk decides what is accepted
 * (yajl words the errors of what the scanner refuses), so such documents
 * are compared neither for acceptance nor for trees. */
static bool has_surrogate_escape(const char *s, size_t n)
{
    for (size_t i = 0; i + 3 < n; i++)
        if (s[i] == '\\' && s[i + 1] == 'u' && (s[i + 2] == 'd' || s[i + 2] == 'D') &&
            strchr("89abcdefABCDEF", s[i + 3]) && s[i + 3])
            return true;
    return false;
}

#endif

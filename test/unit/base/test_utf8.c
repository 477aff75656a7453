/* test_utf8.c - the strict UTF-8 validator. */
#include <criterion/criterion.h>
#include <string.h>

#include "agentsched/base/utf8.h"

Test(utf8, prefix)
{
    static const struct {
        const char *s;
        size_t len, want;
    } cases[] = {
        {"", 0, 0},
        {"plain ascii, longer than eight bytes", 36, 36},
        {"a\0b", 3, 3}, /* NUL is a character */
        {"caf\xc3\xa9", 5, 5},
        {"\xe2\x82\xac\xf0\x9f\x98\x80", 7, 7},
        {"\xf4\x8f\xbf\xbf", 4, 4},  /* U+10FFFF */
        {"\xed\x9f\xbf", 3, 3},      /* U+D7FF */
        {"abcdefgh\xc0\xaf", 10, 8}, /* overlong '/' */
        {"x\xe0\x80\xaf", 4, 1},     /* overlong, three bytes */
        {"ab\xed\xa0\x80", 5, 2},    /* surrogate U+D800 */
        {"\xed\xbf\xbf", 3, 0},      /* surrogate U+DFFF */
        {"\xf4\x90\x80\x80", 4, 0},  /* U+110000 */
        {"\xf5\x80\x80\x80", 4, 0},
        {"abc\xc3", 4, 3}, /* cut short */
        {"\x80", 1, 0},
        {"\xc3\x28", 2, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_expect_eq(utf8_prefix(cases[i].s, cases[i].len), cases[i].want, "case %zu", i);
}

/* test_error.c - as_diag: messages and fields cut to their buffers stay
 * valid UTF-8 (they end up in JSON error answers). */
#include <criterion/criterion.h>
#include <string.h>

#include "agentsched/base/error.h"

/* true when s[0..n) is whole UTF-8 sequences (structure only) */
static bool whole_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t n = *p < 0x80 ? 1 : *p >= 0xF0 ? 4 : *p >= 0xE0 ? 3 : *p >= 0xC0 ? 2 : 0;
        if (!n)
            return false;
        for (size_t i = 1; i < n; i++)
            if ((p[i] & 0xC0) != 0x80)
                return false;
        p += n;
    }
    return true;
}

Test(error, a_cut_message_ends_on_a_character)
{
    as_diag d;
    char big[2048];
    for (int shift = 0; shift < 4; shift++) {
        /* 'x' * shift, then 3-byte and 4-byte characters past the buffer */
        size_t o = 0;
        for (int i = 0; i < shift; i++)
            big[o++] = 'x';
        while (o + 8 < sizeof big) {
            memcpy(big + o, "\xe2\x82\xac\xf0\x9f\x98\x80", 7); /* "€😀" */
            o += 7;
        }
        big[o] = '\0';
        as_diag_set(&d, AS_EINVAL, big, "%s", big);
        cr_assert(whole_utf8(d.msg), "shift %d: message cut inside a character", shift);
        cr_assert(whole_utf8(d.field), "shift %d: field cut inside a character", shift);
        cr_assert_gt(strlen(d.msg), sizeof d.msg - 6);
        as_diag_prefix_field(&d, "Pod");
        cr_assert(whole_utf8(d.field), "shift %d: prefixed field cut inside a character", shift);
    }
}

Test(error, short_texts_are_untouched)
{
    as_diag d;
    as_diag_set(&d, AS_EINVAL, "spec.nodeSelector", "bad value \"%s\"", "caf\xc3\xa9");
    cr_assert_str_eq(d.msg, "bad value \"caf\xc3\xa9\"");
    cr_assert_str_eq(d.field, "spec.nodeSelector");
}

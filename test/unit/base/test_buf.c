/* test_buf.c - the capped buffer and its JSON string writer. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/buf.h"

/* A JSON string written by buf_json_str reads back as the same bytes, for
 * every byte value and every position relative to the 8-byte fast path. */
Test(buf, json_str_round_trips)
{
    static const char *const fixed[] = {
        "",
        "plain",
        "q\"uote",
        "back\\slash",
        "\n\r\t\b\f\x01\x1f",
        "caf\xc3\xa9 \xe2\x82\xac",
        "twelve bytes\"",
        "eight by\"",
        "0123456\\",
        "a/b</script>",
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        buf b;
        buf_init(&b, 0);
        cr_assert_eq(buf_json_str(&b, fixed[i], strlen(fixed[i])), AS_OK);
        cr_assert_eq(b.data[b.len], '\0', "NUL-terminated");
        json_error_t je;
        json_t *j = json_loadb(b.data, b.len, JSON_DECODE_ANY, &je);
        cr_assert_not_null(j, "%zu: %s (%s)", i, b.data, je.text);
        cr_assert_str_eq(json_string_value(j), fixed[i]);
        json_decref(j);
        buf_free(&b);
    }
    /* every byte below 0x80, at every offset within a word */
    char s[140];
    for (int c = 0; c < 0x80; c++) {
        for (size_t at = 0; at < 12; at++) {
            memset(s, 'x', sizeof s);
            s[at] = (char)c;
            s[at + 17] = (char)c;
            size_t n = at + 20;
            buf b;
            buf_init(&b, 0);
            cr_assert_eq(buf_json_str(&b, s, n), AS_OK);
            json_t *j = json_loadb(b.data, b.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
            cr_assert_not_null(j, "byte %#x at %zu: %s", c, at, b.data);
            cr_assert_eq(json_string_length(j), n);
            cr_assert(memcmp(json_string_value(j), s, n) == 0, "byte %#x at %zu", c, at);
            json_decref(j);
            buf_free(&b);
        }
    }
}

/* buf_json_quote writes the same bytes as buf_json_str, without the NUL,
 * within n * 6 + 2 bytes. */
Test(buf, json_quote_matches_json_str)
{
    const char *s = "\x01\x02\x03\x04\x05\x06\x07\x08\"\\\x1f";
    size_t n = strlen(s);
    char out[6 * 11 + 2 + 1];
    memset(out, '#', sizeof out);
    char *end = buf_json_quote(out, s, n);
    cr_assert_leq((size_t)(end - out), n * 6 + 2);
    cr_assert_eq(out[sizeof out - 1], '#', "wrote past its room");
    buf b;
    buf_init(&b, 0);
    cr_assert_eq(buf_json_str(&b, s, n), AS_OK);
    cr_assert_eq(b.len, (size_t)(end - out));
    cr_assert(memcmp(b.data, out, b.len) == 0);
    buf_free(&b);
}

/* The cap holds: a string whose worst case (6 bytes a byte) does not fit is
 * refused, and the buffer keeps what it had; the error sticks. */
Test(buf, json_str_respects_the_cap)
{
    buf b;
    buf_init(&b, 40);
    cr_assert_eq(buf_puts(&b, "ab"), AS_OK);
    cr_assert_eq(buf_json_str(&b, "0123456789", 10), AS_ETOOBIG);
    cr_assert_eq(b.len, 2);
    cr_assert_str_eq(b.data, "ab");
    /* the first error sticks: a writer checks once, at the end */
    cr_assert_eq(buf_json_str(&b, "0", 1), AS_ETOOBIG);
    buf_free(&b);
    buf_init(&b, 40);
    cr_assert_eq(buf_puts(&b, "ab"), AS_OK);
    cr_assert_eq(buf_json_str(&b, "0123", 4), AS_OK);
    cr_assert_str_eq(b.data, "ab\"0123\"");
    buf_free(&b);
}

/* buf_reserve sizes once: appends up to the reserved room keep the same
 * allocation; room past the cap is refused and the error sticks. */
Test(buf, reserve_then_append_without_moving)
{
    buf b;
    buf_init(&b, 1000);
    cr_assert_eq(buf_reserve(&b, 900), AS_OK);
    const char *data = b.data;
    cr_assert_geq(b.alloc, 901);
    char chunk[100];
    memset(chunk, 'x', sizeof chunk);
    for (int i = 0; i < 9; i++)
        cr_assert_eq(buf_append(&b, chunk, sizeof chunk), AS_OK);
    cr_assert_eq(b.data, data, "an append within the reserved room reallocated");
    cr_assert_eq(b.len, 900);
    cr_assert_eq(b.data[900], '\0');
    cr_assert_eq(buf_reserve(&b, 101), AS_ETOOBIG);
    cr_assert_eq(buf_append(&b, "y", 1), AS_ETOOBIG, "the error sticks");
    cr_assert_eq(b.len, 900);
    buf_free(&b);
}

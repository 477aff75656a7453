/* test_jscan.c - the validating JSON scanner. */
#include <criterion/criterion.h>
#include <string.h>

#include "agentsched/base/jscan.h"

Test(jscan, document_accepts_json_only)
{
    static const char *const good[] = {
        "{}",
        " [ ] ",
        "null",
        "-0.5e+3",
        "\"a\\u00e9\\n\"",
        "{\"a\":[1,{\"b\":null}],\"a\":2}",
        "\"\xe2\x98\x83\"",
    };
    static const char *const bad[] = {
        "",        " ",    "{",     "[1,]",     "{\"a\" 1}",
        "01x",     "tru",  "{} {}", "\"\x01\"", "\"\xc0\xaf\"",
        "\"\\x\"", "[1.]", "-",     "{\"a\":}",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        cr_expect(jscan_document(good[i], strlen(good[i])), "good %zu", i);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_not(jscan_document(bad[i], strlen(bad[i])), "bad %zu", i);
}

Test(jscan, depth_is_capped)
{
    char doc[2 * (JSCAN_MAX_DEPTH + 1)];
    for (int d = JSCAN_MAX_DEPTH; d <= JSCAN_MAX_DEPTH + 1; d++) {
        memset(doc, '[', (size_t)d);
        memset(doc + d, ']', (size_t)d);
        as_diag diag = {{0}, {0}};
        jscan s = {.base = doc, .p = doc, .end = doc + 2 * d, .diag = &diag};
        int ok = jscan_value(&s);
        cr_expect_eq(ok, d <= JSCAN_MAX_DEPTH, "depth %d", d);
        cr_expect_eq(s.err, d <= JSCAN_MAX_DEPTH ? AS_OK : AS_ETOOBIG, "depth %d", d);
    }
}

Test(jscan, syntax_errors_name_the_byte)
{
    const char *doc = "{\"a\":[1,2,]}";
    as_diag diag = {{0}, {0}};
    jscan s = {.base = doc, .p = doc, .end = doc + strlen(doc), .diag = &diag};
    cr_assert_eq(jscan_value(&s), 0);
    cr_expect_eq(s.err, AS_EPARSE);
    cr_expect(strstr(diag.msg, "malformed JSON near byte 10: trailing comma in an array"), "%s",
              diag.msg);
}

Test(jscan, keys_holding_nul)
{
    const char *doc = "{\"a\\u0000\":1}";
    for (int ok = 0; ok < 2; ok++) {
        as_diag diag = {{0}, {0}};
        jscan s = {
            .base = doc, .p = doc, .end = doc + strlen(doc), .diag = &diag, .keys_nul_ok = ok};
        cr_expect_eq(jscan_value(&s), ok);
        cr_expect_eq(s.err, ok ? AS_OK : AS_EINVAL, "%s", diag.msg);
    }
}

Test(jscan, strings_and_members)
{
    const char *doc = "{ \"k\" : \"plain\", \"e\\\"\":\"x\\ty\" }";
    as_diag diag = {{0}, {0}};
    jscan s = {.base = doc, .p = doc, .end = doc + strlen(doc), .diag = &diag};
    cr_assert(jscan_enter(&s));
    bool first = true, esc;
    const char *k, *raw;
    size_t kl, len;
    cr_assert_eq(jscan_next_key(&s, &first, &k, &kl, &esc), 1);
    cr_expect(kl == 1 && k[0] == 'k' && !esc);
    cr_assert(jscan_string(&s, &raw, &len, &esc));
    cr_expect(len == 5 && memcmp(raw, "plain", 5) == 0 && !esc);
    cr_assert_eq(jscan_next_key(&s, &first, &k, &kl, &esc), 1);
    cr_expect(kl == 3 && esc);
    cr_assert(jscan_string(&s, &raw, &len, &esc));
    cr_expect(esc);
    char out[16];
    size_t n = jscan_unescape(raw, len, out);
    cr_expect(n == 3 && memcmp(out, "x\ty", 3) == 0);
    cr_expect_eq(jscan_next_key(&s, &first, &k, &kl, &esc), 0);
    cr_expect_eq(s.depth, 0);
    cr_expect_eq(s.p, doc + strlen(doc));
}

Test(jscan, unescape_and_nul)
{
    static const struct {
        const char *raw, *want;
        bool nul;
    } cases[] = {
        {"a\\/b", "a/b", false},
        {"\\u00e9", "\xc3\xa9", false},
        {"\\ud83d\\ude00", "\xf0\x9f\x98\x80", false},
        {"\\ud800x", "\xef\xbf\xbdx", false}, /* a lone surrogate is U+FFFD */
        {"\\udc00", "\xef\xbf\xbd", false},
        {"a\\u0000b", "a\0b", true},
        {"a\\\\u0000", "a\\u0000", false}, /* an escaped backslash, then text */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[32];
        size_t rl = strlen(cases[i].raw);
        size_t wl = cases[i].nul ? 3 : strlen(cases[i].want);
        size_t n = jscan_unescape(cases[i].raw, rl, out);
        cr_expect(n == wl && memcmp(out, cases[i].want, n) == 0, "case %zu", i);
        cr_expect_eq(jscan_esc_has_nul(cases[i].raw, rl), cases[i].nul, "case %zu", i);
    }
}

Test(jscan, count_values_outside_strings)
{
    cr_expect_eq(jscan_count_values("{}", 2), 2);
    const char *s = "{\"a,{[\\\",\":[1,2],\"long string of more than sixteen bytes, {[,\":{}}";
    cr_expect_eq(jscan_count_values(s, strlen(s)), 6);
    /* an unterminated string: what was counted before it */
    cr_expect_eq(jscan_count_values("[1,\"x,", 6), 3);
}

/* The skipping loop and the diagnosing recursion accept the same values
 * and stop at the same byte: strings whose quote, escape, control or
 * non-ASCII byte falls on either side of a 16-byte step, members and
 * elements with whitespace everywhere JSON allows it, and the depth left
 * by the containers already open. */
Test(jscan, skip_agrees_at_every_step)
{
    static const struct {
        const char *doc;
        int ok;      /* jscan_value's answer */
        size_t stop; /* s.p - doc when ok */
    } rows[] = {
        {"\"0123456789abcde\"", 1, 17},
        {"\"0123456789abcdef\"", 1, 18},
        {"\"0123456789abcdefg\"x", 1, 19},
        {"\"0123456789abcdef\\\"gh\"", 1, 22},
        {"\"0123456789abcdef\\u00e9ghijklmnopqrstu\"", 1, 39},
        {"\"0123456789abcdef\\q\"", 0, 0},
        {"\"0123456789abcdef\\u00g9\"", 0, 0},
        {"\"0123456789abcdef\x01\"", 0, 0},
        {"\"0123456789abcdef\xc3\xa9zzzzzzzzzzzzzzzzzz\"", 1, 38},
        {"\"0123456789abcdef\xc3\"", 0, 0},
        {"\"0123456789abcdefghijklmnopqrstuv", 0, 0},
        {" \t\r\n{ \"a\" : [ 1 , -2.5e-3 , true , false , null , { } , [ ] ] } ,", 1, 63},
        {"{\"a\":1,}", 0, 0},
        {"{,\"a\":1}", 0, 0},
        {"[,1]", 0, 0},
        {"[1 2]", 0, 0},
        {"{\"a\":1]", 0, 0},
        {"[{\"a\":1}}", 0, 0},
        {"{\"k\\u0000\":1}", 0, 0},
        {"{\"k\\u0001\":[\"\\u0000\"]}", 1, 22},
        {"[01]", 0, 0},
        {"[1.e5]", 0, 0},
        {"[1e]", 0, 0},
        {"[-]", 0, 0},
        {"[nul]", 0, 0},
        {"[truex]", 0, 0},
        {"123 ", 1, 3},
        {"[1]]", 1, 3},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const char *doc = rows[i].doc;
        as_diag diag = {{0}, {0}};
        jscan s = {.base = doc, .p = doc, .end = doc + strlen(doc), .diag = &diag};
        int ok = jscan_value(&s);
        cr_expect_eq(ok, rows[i].ok, "row %zu: %s", i, diag.msg);
        if (ok)
            cr_expect_eq((size_t)(s.p - doc), rows[i].stop, "row %zu", i);
        else
            cr_expect(s.err != AS_OK && diag.msg[0], "row %zu names its fault", i);
    }
    /* two levels left: one more container nests too deep */
    const char *docs[] = {"[[1]]", "[[[1]]]"};
    for (int i = 0; i < 2; i++) {
        as_diag diag = {{0}, {0}};
        jscan s = {.base = docs[i],
                   .p = docs[i],
                   .end = docs[i] + strlen(docs[i]),
                   .diag = &diag,
                   .depth = JSCAN_MAX_DEPTH - 2};
        cr_expect_eq(jscan_value(&s), i == 0, "nesting %d", i + 2);
        cr_expect_eq(s.depth, JSCAN_MAX_DEPTH - 2 + (i == 0 ? 0 : 3));
    }
}

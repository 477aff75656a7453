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

/* test_json.c - the JSON layer: the DOM builder and its walk, the skip
 * rules, projections and the case-insensitive lookup. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/json.h"
#include "json_fixtures.h"

Test(json, parse_json_matches_jansson)
{
    static const char *docs[] = {
        "{}",
        "[]",
        "null",
        "1",
        "-1.5e3",
        "\"s\\n\\u2603\"",
        "{\"a\":{\"b\":[1,2,{\"c\":null}]},\"d\":true,\"e\":false,\"a\":3}",
        "[[[[[]]]],{},\"\",0]",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        json_t *mine = NULL;
        as_diag d = {0};
        cr_assert_eq(json_parse(docs[i], strlen(docs[i]), &mine, &d), AS_OK, "%s: %s", docs[i],
                     d.msg);
        json_t *ref = json_loads(docs[i], JSON_DECODE_ANY, NULL);
        cr_assert(json_equal(mine, ref), "doc %zu differs", i);
        json_decref(mine);
        json_decref(ref);
    }
}

/* The skip rules: members of objects under a parent (directly or as array
 * items) are left out, whatever their value; the same names elsewhere,
 * and the parents themselves, stay; left-out values are still validated. */
Test(json, parse_json_skip_rules)
{
    static const char *const meta_keys[] = {"managedFields", "annotations", NULL};
    static const char *const ctr_keys[] = {"env", NULL};
    static const json_skip rules[] = {
        {"metadata", meta_keys}, {"containers", ctr_keys}, {NULL, NULL}};
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"{\"metadata\":{\"name\":\"a\",\"managedFields\":[{\"f\":{\"g\":[1,{}]}}],"
         "\"annotations\":{\"x\":\"y\"},\"labels\":{\"managedFields\":\"kept\"}}}",
         "{\"metadata\":{\"name\":\"a\",\"labels\":{\"managedFields\":\"kept\"}}}"},
        /* scalars, null and empty containers are left out alike */
        {"{\"metadata\":{\"annotations\":null,\"managedFields\":3,\"x\":1}}",
         "{\"metadata\":{\"x\":1}}"},
        {"{\"metadata\":{\"managedFields\":[],\"annotations\":{}}}", "{\"metadata\":{}}"},
        /* objects inside an array under the parent; nested arrays too */
        {"{\"spec\":{\"containers\":[{\"name\":\"c\",\"env\":[{\"name\":\"E\"}]},"
         "{\"env\":1,\"image\":\"i\"}]}}",
         "{\"spec\":{\"containers\":[{\"name\":\"c\"},{\"image\":\"i\"}]}}"},
        /* only direct members: deeper objects are not under the parent */
        {"{\"metadata\":{\"labels\":{\"annotations\":\"kept\"},\"x\":{\"env\":1}}}",
         "{\"metadata\":{\"labels\":{\"annotations\":\"kept\"},\"x\":{\"env\":1}}}"},
        /* an object nested under a skipped value's sibling keeps its rule */
        {"{\"items\":[{\"metadata\":{\"managedFields\":{},\"name\":\"n\"}},{\"metadata\":"
         "{\"name\":\"m\",\"annotations\":[[],[{}]]}}]}",
         "{\"items\":[{\"metadata\":{\"name\":\"n\"}},{\"metadata\":{\"name\":\"m\"}}]}"},
        /* names match exactly */
        {"{\"Metadata\":{\"managedFields\":1},\"metadata\":{\"ManagedFields\":2}}",
         "{\"Metadata\":{\"managedFields\":1},\"metadata\":{\"ManagedFields\":2}}"},
        {"[{\"metadata\":{\"annotations\":1}}]", "[{\"metadata\":{}}]"},
        {"\"metadata\"", "\"metadata\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *got = NULL;
        as_diag d = {0};
        cr_assert_eq(json_parse_skip(cases[i].in, strlen(cases[i].in), rules, &got, &d), AS_OK,
                     "case %zu: %s", i, d.msg);
        json_t *want = json_loads(cases[i].want, JSON_DECODE_ANY, NULL);
        cr_assert_not_null(want, "case %zu: bad expectation", i);
        char *g = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        cr_assert(json_equal(got, want), "case %zu: got %s", i, g);
        free(g);
        json_decref(got);
        json_decref(want);
        /* no rules: the whole document, as json_parse builds it */
        cr_assert_eq(json_parse_skip(cases[i].in, strlen(cases[i].in), NULL, &got, &d), AS_OK);
        json_t *all = json_loads(cases[i].in, JSON_DECODE_ANY, NULL);
        cr_assert(json_equal(got, all), "case %zu without rules", i);
        json_decref(got);
        json_decref(all);
    }
    /* a left-out value is still parsed: malformed JSON or nesting past the
     * cap inside it fails the document */
    static const char *const bad[] = {
        "{\"metadata\":{\"managedFields\":[1,}]}}",
        "{\"metadata\":{\"annotations\":{\"a\" 1}}}",
        "{\"metadata\":{\"managedFields\":tru}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *got = NULL;
        as_diag d = {0};
        cr_expect_eq(json_parse_skip(bad[i], strlen(bad[i]), rules, &got, &d), AS_EPARSE, "bad %zu",
                     i);
        cr_expect_null(got);
    }
    char deep[512] = "{\"metadata\":{\"managedFields\":";
    size_t n = strlen(deep);
    for (int k = 0; k < 80; k++)
        deep[n++] = '[';
    for (int k = 0; k < 80; k++)
        deep[n++] = ']';
    memcpy(deep + n, "}}", 3);
    json_t *got = NULL;
    as_diag d = {0};
    cr_expect_eq(json_parse_skip(deep, strlen(deep), rules, &got, &d), AS_ETOOBIG, "%s", d.msg);
    cr_expect_null(got);
}

/* A rule with parent "" names members of the root object only; the walk
 * and yajl's builder (the reference) leave out the same. */
Test(json, skip_rule_for_the_root)
{
    static const char *const spec_keys[] = {"spec", NULL};
    static const char *const ctr_keys[] = {"env", NULL};
    static const json_skip rules[] = {{"containers", ctr_keys}, {"", spec_keys}, {NULL, NULL}};
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"{\"metadata\":{\"spec\":1},\"spec\":{\"containers\":[{\"env\":[]}]},\"status\":{}}",
         "{\"metadata\":{\"spec\":1},\"status\":{}}"},
        /* a member named "" is no root */
        {"{\"\":{\"spec\":2},\"spec\":null}", "{\"\":{\"spec\":2}}"},
        /* a root array's objects are under no member */
        {"[{\"spec\":1}]", "[{\"spec\":1}]"},
        {"{\"spec\":1,\"spec\":2}", "{}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *walked = NULL, *ref = NULL;
        as_diag d = {0};
        cr_assert_eq(json_parse_skip(cases[i].in, strlen(cases[i].in), rules, &walked, &d), AS_OK,
                     "case %zu: %s", i, d.msg);
        cr_assert_eq(json_parse_ref(cases[i].in, strlen(cases[i].in), rules, &ref, &d), AS_OK,
                     "case %zu: %s", i, d.msg);
        json_t *want = json_loads(cases[i].want, JSON_DECODE_ANY, NULL);
        cr_assert_not_null(want, "case %zu: bad expectation", i);
        char *g = json_dumps(walked, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        cr_assert(json_equal(walked, want), "case %zu: got %s", i, g);
        cr_assert(json_equal(ref, want), "case %zu: the reference differs", i);
        free(g);
        json_decref(walked);
        json_decref(ref);
        json_decref(want);
    }
}

/* json_parse (the scanner's validation, then the walk) against
 * yajl alone: equal trees; errors, malformed or not, in yajl's words. */
Test(json, parse_json_walk_matches_yajl)
{
    static const char *const docs[] = {
        "{}",
        "[]",
        "null",
        "true",
        " false ",
        "1",
        "-0",
        "-1.5e3",
        "\"s\\n\\u2603\"",
        "\"end\"",
        "[\"a\",\"b\\\"\"]",
        "{\"a\":{\"b\":[1,2,{\"c\":null}]},\"a\":3}",
        "  {\"k\" : [ 1 , 2 ] }  \n",
        /* errors */
        "",
        " ",
        "{",
        "{\"a\":}",
        "[1,]",
        "{} {}",
        "tru",
        "\"\\x\"",
        "[1e400]",
        "[9223372036854775808]",
        "\"\x01\"",
        "\"\xff\"",
        "01",
        "{\"a\" 1}",
        /* strict UTF-8 in strings and keys, NUL in keys */
        "[\"\xc0\xaf\"]",
        "{\"\xed\xa0\x80\":1}",
        "{\"a\":\"\xf4\x90\x80\x80\"}",
        "{\"a\\u0000b\":1}",
        "[{\"a\":{\"b\\u0000\":1}}]",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        json_t *w = NULL, *y = NULL;
        as_diag wd = {0}, yd = {0};
        size_t n = strlen(docs[i]);
        as_err we = json_parse(docs[i], n, &w, &wd);
        as_err ye = json_parse_ref(docs[i], n, NULL, &y, &yd);
        cr_assert_eq(we, ye, "doc %zu: walk %s, yajl %s", i, wd.msg, yd.msg);
        if (we) {
            cr_assert_str_eq(wd.msg, yd.msg, "doc %zu", i);
            cr_assert_null(w);
        } else {
            cr_assert(json_equal(w, y), "doc %zu", i);
        }
        if (w)
            json_decref(w);
        if (y)
            json_decref(y);
    }
    /* strings of every short length at the end of the document (the walk
     * reads ahead 8 bytes at a time) */
    char doc[64];
    for (size_t len = 0; len < 40; len++) {
        memset(doc, 'x', sizeof doc);
        doc[0] = '"';
        doc[len + 1] = '"';
        json_t *w = NULL;
        as_diag wd = {0};
        cr_assert_eq(json_parse(doc, len + 2, &w, &wd), AS_OK, "%s", wd.msg);
        cr_assert_eq(json_string_length(w), len);
        json_decref(w);
    }
}

Test(json, get_is_case_insensitive)
{
    json_t *o = json_loads("{\"Pod\":1,\"nodenames\":2}", 0, NULL);
    cr_assert_eq(json_integer_value(json_get(o, "Pod")), 1);
    cr_assert_eq(json_integer_value(json_get(o, "POD")), 1);
    cr_assert_eq(json_integer_value(json_get(o, "NodeNames")), 2);
    cr_assert_null(json_get(o, "Nodes"));
    cr_assert_null(json_get(NULL, "Nodes"));
    json_decref(o);
}

/* A projection is the text of what the skip rules build: a memo keyed by
 * it (the extender's decoded Pod specs) ignores what the model never
 * reads. */
Test(json, projection_is_what_the_rules_build)
{
    static const char *const meta_keys[] = {"managedFields", "annotations", NULL};
    static const char *const ctr_keys[] = {"env", NULL};
    static const char *const spec_keys[] = {"volumes", NULL};
    static const json_skip rules[] = {
        {"metadata", meta_keys}, {"containers", ctr_keys}, {"spec", spec_keys}, {NULL, NULL}};
    static const struct {
        const char *doc, *parent, *want; /* want NULL: not projected */
    } cases[] = {
        {"{\"containers\":[{\"name\":\"c\",\"env\":[{\"name\":\"S\",\"value\":\"1\"}],"
         "\"resources\":{\"requests\":{\"cpu\":\"1\"}}}],\"volumes\":[{\"name\":\"v\"}],"
         "\"nodeSelector\":{\"a\":\"b\"}}",
         "spec",
         "{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"1\"}}}],"
         "\"nodeSelector\":{\"a\":\"b\"}}"},
        /* the same spec with other env values and volumes: the same text */
        {" { \"containers\" : [ { \"name\" : \"c\" , \"env\" : [ ] , \"resources\" : { "
         "\"requests\" : { \"cpu\" : \"1\" } } } ] , \"volumes\" : null , \"nodeSelector\" : { "
         "\"a\" : \"b\" } } ",
         "spec",
         "{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"1\"}}}],"
         "\"nodeSelector\":{\"a\":\"b\"}}"},
        /* left-out members first, last, alone, and every one */
        {"{\"volumes\":1,\"a\":2}", "spec", "{\"a\":2}"},
        {"{\"a\":2,\"volumes\":1}", "spec", "{\"a\":2}"},
        {"{\"volumes\":{\"x\":[1,{}]}}", "spec", "{}"},
        {"{\"volumes\":1,\"volumes\":2}", "spec", "{}"},
        /* the rule is the parent's: under no parent, nothing is left out */
        {"{\"volumes\":1,\"env\":2}", NULL, "{\"volumes\":1,\"env\":2}"},
        {"{\"volumes\":1}", "other", "{\"volumes\":1}"},
        /* rules apply at any depth, by the member a container sits under */
        {"{\"x\":{\"metadata\":{\"annotations\":{},\"name\":\"n\"}},\"containers\":[[{\"env\":1,"
         "\"k\":true}],{\"env\":2}]}",
         NULL, "{\"x\":{\"metadata\":{\"name\":\"n\"}},\"containers\":[[{\"k\":true}],{}]}"},
        /* a root array's objects sit under no member */
        {"[{\"env\":1},{\"metadata\":{\"annotations\":2}}]", NULL,
         "[{\"env\":1},{\"metadata\":{}}]"},
        {"[{\"env\":1}]", "containers", "[{}]"},
        /* scalars, escapes in values and keys kept byte for byte */
        {"{\"s\":\"a\\\"b\\u00e9\",\"n\":[-1.5e3,0,true,false,null],\"d\":{}}", "spec",
         "{\"s\":\"a\\\"b\\u00e9\",\"n\":[-1.5e3,0,true,false,null],\"d\":{}}"},
        {"\"plain\"", NULL, "\"plain\""},
        {"12", "spec", "12"},
        /* not projected: an escaped key (kept or not), an out-of-range
         * number anywhere (the builder refuses it even in a left-out
         * member) */
        {"{\"volum\\u0065s\":1}", "spec", NULL},
        {"{\"a\":{\"k\\\"\":1}}", "spec", NULL},
        {"{\"volumes\":[1e400]}", "spec", NULL},
        {"{\"a\":99999999999999999999}", "spec", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        project(cases[i].doc, rules, cases[i].parent, cases[i].want);

    /* the output cap: one byte short fails, exact fits */
    const char *doc = "{\"a\":[1,2],\"volumes\":{}}";
    char out[64];
    size_t n = 0;
    cr_assert(json_project(doc, strlen(doc), rules, "spec", out, 11, &n));
    cr_assert_eq(n, 11);
    cr_assert_not(json_project(doc, strlen(doc), rules, "spec", out, 10, &n));
    /* nesting past the cap */
    char deep[300];
    size_t k = 0;
    for (int d = 0; d < 70; d++)
        deep[k++] = '[';
    for (int d = 0; d < 70; d++)
        deep[k++] = ']';
    char *big = malloc(4096);
    cr_assert_not(json_project(deep, k, rules, NULL, big, 4096, &n));
    free(big);
}

/* A span the scanner validated builds as json_parse builds it. */
Test(json, parse_validated_is_parse)
{
    static const char *const docs[] = {
        "{\"a\":{\"b\":[1,2.5,{\"c\":null}]},\"d\":\"\\u00e9\",\"a\":3}",
        " [true,false] ",
        "\"\\ud800\"",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        size_t n = strlen(docs[i]);
        cr_assert(jscan_document(docs[i], n));
        json_t *w = NULL, *v = NULL;
        as_diag d = {{0}, {0}};
        cr_assert_eq(json_parse(docs[i], n, &w, &d), AS_OK, "%s", d.msg);
        cr_assert_eq(json_parse_validated(docs[i], n, NULL, &v, &d), AS_OK, "%s", d.msg);
        cr_expect(json_equal(w, v), "doc %zu", i);
        json_decref(w);
        json_decref(v);
    }
}

/* The iterator reads a validated object's members in document order,
 * typed, jumps over a value whose end it is told, and answers -1 for
 * what the DOM builder may refuse. */
Test(json, iter_reads_members)
{
    const char *doc = " {\"s\":\"a\\\"b\", \"o\":{\"x\":[1]},\"a\":[],\"n\":-1.5,\"t\":true,"
                      "\"f\":false,\"z\":null,\"k\\u0065\":1}";
    static const struct {
        const char *key, *val;
        char type;
        bool kesc, esc;
    } want[] = {
        {"s", "a\\\"b", '"', false, true}, {"o", "{\"x\":[1]}", '{', false, false},
        {"a", "[]", '[', false, false},    {"n", "-1.5", '0', false, false},
        {"t", "true", 't', false, false},  {"f", "false", 'f', false, false},
        {"z", "null", 'n', false, false},  {"k\\u0065", "1", '0', true, false},
    };
    json_iter it;
    cr_assert(json_iter_begin(&it, doc, strlen(doc)));
    const char *k;
    size_t kl;
    bool kesc;
    json_value v;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        cr_assert_eq(json_iter_next(&it, &k, &kl, &kesc, &v), 1, "member %zu", i);
        cr_expect(kl == strlen(want[i].key) && memcmp(k, want[i].key, kl) == 0, "member %zu", i);
        cr_expect(v.len == strlen(want[i].val) && memcmp(v.s, want[i].val, v.len) == 0,
                  "member %zu: %.*s", i, (int)v.len, v.s);
        cr_expect_eq(v.type, want[i].type, "member %zu", i);
        cr_expect_eq(kesc, want[i].kesc, "member %zu", i);
        cr_expect_eq(v.esc, want[i].esc, "member %zu", i);
    }
    cr_expect_eq(json_iter_next(&it, &k, &kl, &kesc, &v), 0);
    cr_expect_not(json_iter_begin(&it, "[1]", 3));

    /* a value whose end is known is not walked */
    const char *spec = "{\"spec\":{\"a\":1},\"b\":2}";
    cr_assert(json_iter_begin(&it, spec, strlen(spec)));
    it.known = spec + 8;
    it.known_end = spec + 12; /* "{\"a\"": a shorter end than the value's */
    cr_assert_eq(json_iter_next(&it, &k, &kl, &kesc, &v), 1);
    cr_expect_eq(v.len, 4);

    /* what the builder refuses: a number out of range, a key holding NUL */
    static const char *const refused[] = {"{\"a\":[1e400]}", "{\"a\":99999999999999999999}",
                                          "{\"a\\u0000\":1}", "{\"a\":{\"b\\u0000\":1}}"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        cr_assert(json_iter_begin(&it, refused[i], strlen(refused[i])));
        cr_expect_eq(json_iter_next(&it, &k, &kl, &kesc, &v), -1, "refused %zu", i);
    }
}

/* A string yajl hands over is held to strict UTF-8, located in the body
 * when it points there, else at what yajl consumed. */
Test(json, check_utf8_locates_the_byte)
{
    const char *body = "[\"ab\xc0\xaf\"]";
    as_diag d = {{0}, {0}};
    cr_expect_eq(json_check_utf8(body, strlen(body), 99, body + 2, 2, &d), AS_OK);
    cr_assert_eq(json_check_utf8(body, strlen(body), 99, body + 2, 4, &d), AS_EPARSE);
    cr_expect(strstr(d.msg, "near byte 4: invalid UTF-8 in string"), "%s", d.msg);
    const char decoded[] = "\xed\xa0\x80";
    cr_assert_eq(json_check_utf8(body, strlen(body), 7, decoded, 3, &d), AS_EPARSE);
    cr_expect(strstr(d.msg, "near byte 7:"), "%s", d.msg);
    cr_expect_eq(json_check_utf8(body, strlen(body), 7, decoded, 3, NULL), AS_EPARSE);
}

/* A number JSON allows but the DOM cannot hold is refused as out of range,
 * not as malformed JSON, by the walk and by yajl's pass alike. */
Test(json, number_out_of_range_is_not_malformed)
{
    const char *docs[] = {"{\"x\":123456789012345678901234567890}", "[1e999999]",
                          "{\"a\":[-99999999999999999999]}"};
    for (size_t i = 0; i < sizeof docs / sizeof *docs; i++) {
        json_t *out = NULL;
        as_diag d = {{0}, {0}};
        cr_assert_eq(json_parse(docs[i], strlen(docs[i]), &out, &d), AS_EPARSE, "%s", docs[i]);
        cr_expect(strstr(d.msg, "number out of range near byte ") && !strstr(d.msg, "malformed"),
                  "%s: %s", docs[i], d.msg);
        cr_assert_eq(json_parse_ref(docs[i], strlen(docs[i]), NULL, &out, &d), AS_EPARSE);
        cr_expect(strstr(d.msg, "number out of range near byte ") && !strstr(d.msg, "malformed"),
                  "%s: %s", docs[i], d.msg);
    }
}

/* test_doc.c - YAML / JSON reader. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/doc.h"

static json_t *ok1(const char *s)
{
    json_t *v = NULL;
    as_diag d = {{0}, {0}};
    as_err err = doc_parse(s, strlen(s), false, &v, &d);
    cr_assert_eq(err, AS_OK, "%s -> %s", s, d.msg);
    return v;
}

static void fails(const char *s, bool multi, const char *frag1, const char *frag2)
{
    json_t *v = (json_t *)0x1;
    as_diag d = {{0}, {0}};
    as_err err = doc_parse(s, strlen(s), multi, &v, &d);
    cr_expect_eq(err, AS_EPARSE, "%s: err %d (%s)", s, err, d.msg);
    cr_expect_null(v);
    if (frag1)
        cr_expect(strstr(d.msg, frag1) != NULL, "msg lacks \"%s\": %s", frag1, d.msg);
    if (frag2)
        cr_expect(strstr(d.msg, frag2) != NULL, "msg lacks \"%s\": %s", frag2, d.msg);
}

/* Parses "v: <scalar>" and returns the value (borrowed from *root). */
static json_t *scalar(const char *text, json_t **root)
{
    char buf[256];
    snprintf(buf, sizeof buf, "v: %s\n", text);
    *root = ok1(buf);
    json_t *v = json_object_get(*root, "v");
    cr_assert_not_null(v, "%s", text);
    return v;
}

Test(doc, core_schema_scalars)
{
    static const struct {
        const char *text;
        json_type type;
        long long i;
        double d;
        const char *s;
    } tc[] = {
        {"null", JSON_NULL, 0, 0, NULL},
        {"Null", JSON_NULL, 0, 0, NULL},
        {"NULL", JSON_NULL, 0, 0, NULL},
        {"~", JSON_NULL, 0, 0, NULL},
        {"", JSON_NULL, 0, 0, NULL},
        {"true", JSON_TRUE, 0, 0, NULL},
        {"True", JSON_TRUE, 0, 0, NULL},
        {"FALSE", JSON_FALSE, 0, 0, NULL},
        {"yes", JSON_STRING, 0, 0, "yes"},
        {"on", JSON_STRING, 0, 0, "on"},
        {"2", JSON_INTEGER, 2, 0, NULL},
        {"-17", JSON_INTEGER, -17, 0, NULL},
        {"+5", JSON_INTEGER, 5, 0, NULL},
        {"007", JSON_INTEGER, 7, 0, NULL},
        {"0o17", JSON_INTEGER, 15, 0, NULL},
        {"0x1F", JSON_INTEGER, 31, 0, NULL},
        {"9223372036854775807", JSON_INTEGER, 9223372036854775807LL, 0, NULL},
        {"9223372036854775808", JSON_STRING, 0, 0, "9223372036854775808"},
        {"0.5", JSON_REAL, 0, 0.5, NULL},
        {".5", JSON_REAL, 0, 0.5, NULL},
        {"5.", JSON_REAL, 0, 5.0, NULL},
        {"1e3", JSON_REAL, 0, 1000.0, NULL},
        {"1E-3", JSON_REAL, 0, 0.001, NULL},
        {"-2.5e+2", JSON_REAL, 0, -250.0, NULL},
        {"1e999", JSON_STRING, 0, 0, "1e999"},
        {".inf", JSON_STRING, 0, 0, ".inf"},
        {".nan", JSON_STRING, 0, 0, ".nan"},
        {"100m", JSON_STRING, 0, 0, "100m"},
        {"1.5Gi", JSON_STRING, 0, 0, "1.5Gi"},
        {"1.2.3", JSON_STRING, 0, 0, "1.2.3"},
        {"0x", JSON_STRING, 0, 0, "0x"},
        {"\"2\"", JSON_STRING, 0, 0, "2"},
        {"'true'", JSON_STRING, 0, 0, "true"},
        {"\"null\"", JSON_STRING, 0, 0, "null"},
        {"!!str 5", JSON_STRING, 0, 0, "5"},
        {"! 5", JSON_STRING, 0, 0, "5"},
        {"!!int \"12\"", JSON_INTEGER, 12, 0, NULL},
        {"!!float 2", JSON_REAL, 0, 2.0, NULL},
        {"!custom 3", JSON_INTEGER, 3, 0, NULL},
        {"hello world", JSON_STRING, 0, 0, "hello world"},
        {"\"caf\\u00e9\"", JSON_STRING, 0, 0, "caf\xc3\xa9"},
    };
    for (size_t i = 0; i < sizeof tc / sizeof tc[0]; i++) {
        json_t *root;
        json_t *v = scalar(tc[i].text, &root);
        json_type t = json_typeof(v);
        cr_expect_eq(t, tc[i].type, "%s: type %d want %d", tc[i].text, t, tc[i].type);
        if (t == tc[i].type) {
            if (t == JSON_INTEGER)
                cr_expect_eq(json_integer_value(v), tc[i].i, "%s", tc[i].text);
            if (t == JSON_REAL)
                cr_expect_eq(json_real_value(v), tc[i].d, "%s", tc[i].text);
            if (t == JSON_STRING)
                cr_expect_str_eq(json_string_value(v), tc[i].s, "%s", tc[i].text);
        }
        json_decref(root);
    }
}

Test(doc, block_and_flow_structure)
{
    json_t *v = ok1("kind: List\nitems:\n- a: 1\n  b: [x, \"y\"]\n- {c: d}\n- - nested\n"
                    "text: |\n  line1\n  line2\n");
    cr_assert(json_is_object(v));
    json_t *items = json_object_get(v, "items");
    cr_assert_eq(json_array_size(items), 3);
    cr_assert_eq(json_integer_value(json_object_get(json_array_get(items, 0), "a")), 1);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(items, 1), "c")), "d");
    cr_assert(json_is_array(json_array_get(items, 2)));
    cr_assert_str_eq(json_string_value(json_object_get(v, "text")), "line1\nline2\n");
    json_decref(v);
}

Test(doc, keys_keep_their_text)
{
    json_t *v = ok1("1: a\ntrue: b\nnull: c\n");
    cr_assert_str_eq(json_string_value(json_object_get(v, "1")), "a");
    cr_assert_str_eq(json_string_value(json_object_get(v, "true")), "b");
    cr_assert_str_eq(json_string_value(json_object_get(v, "null")), "c");
    json_decref(v);
}

Test(doc, anchors_and_aliases_rejected)
{
    fails("a: &x 1\nb: 2\n", false, "line 1 column 4", "anchors (&x)");
    fails("a: &x {k: v}\n", false, "anchors", NULL);
    fails("a: [1]\nb: *x\n", false, "line 2", NULL);
    fails("base: &b {cpu: 1}\nother:\n  <<: *b\n", false, "anchors", NULL);
}

Test(doc, alias_message)
{
    /* an alias to an unknown anchor is still reported as an alias */
    json_t *v = (json_t *)0x1;
    as_diag d = {{0}, {0}};
    const char *s = "a: 1\nb: *nope\n";
    cr_assert_eq(doc_parse(s, strlen(s), false, &v, &d), AS_EPARSE);
    cr_expect(strstr(d.msg, "aliases (*nope)") != NULL, "%s", d.msg);
    cr_expect(strstr(d.msg, "line 2 column 4") != NULL, "%s", d.msg);
}

Test(doc, syntax_errors_have_positions)
{
    fails("a: [1, 2\nb: 3\n", false, "line ", "column ");
    fails("a: b\n c: d\n", false, "line 2", NULL);
    fails("a: \"unterminated\n", false, "line ", NULL);
    fails("{\"a\": 1,\n \"b\": }\n", false, "line 2 column", NULL);
    fails("[1, 2", false, "line 1", NULL);
    fails("{\"a\": 1} trailing", false, "line 1", NULL);
}

Test(doc, duplicate_and_complex_keys)
{
    fails("a: 1\nb: 2\na: 3\n", false, "duplicate key \"a\"", "line 3");
    fails("{\"a\": 1, \"a\": 2}", false, "duplicate", NULL);
    fails("? [a, b]\n: 1\n", false, "keys must be scalars", NULL);
    fails("? {a: 1}\n: 1\n", false, "keys must be scalars", NULL);
}

Test(doc, bad_tags_and_nul)
{
    fails("v: !!int abc\n", false, "tagged !!int", NULL);
    fails("v: !!bool 3\n", false, "tagged !!bool", NULL);
    fails("v: \"a\\0b\"\n", false, "NUL", NULL);
}

static char *nested(const char *open, const char *close, int depth, const char *prefix)
{
    size_t n = strlen(prefix) + (size_t)depth * (strlen(open) + strlen(close)) + 8;
    char *s = malloc(n);
    cr_assert_not_null(s);
    strcpy(s, prefix);
    for (int i = 0; i < depth; i++)
        strcat(s, open);
    for (int i = 0; i < depth; i++)
        strcat(s, close);
    return s;
}

Test(doc, depth_cap)
{
    /* YAML: "v: [[[...]]]" has the mapping plus `depth` sequences */
    char *s = nested("[", "]", DOC_MAX_DEPTH - 1, "v: ");
    json_t *root = ok1(s);
    json_decref(root);
    free(s);
    s = nested("[", "]", DOC_MAX_DEPTH, "v: ");
    fails(s, false, "deeper than 64", NULL);
    free(s);
    /* JSON */
    s = nested("[", "]", DOC_MAX_DEPTH, "");
    root = ok1(s);
    json_decref(root);
    free(s);
    s = nested("[", "]", DOC_MAX_DEPTH + 1, "");
    fails(s, false, "deeper than 64", NULL);
    free(s);
    s = nested("{\"a\":", "}", 5000, "");
    fails(s, false, NULL, NULL);
    free(s);
}

Test(doc, multi_documents)
{
    const char *s = "---\na: 1\n---\nb: 2\n...\n---\n";
    json_t *v = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(doc_parse(s, strlen(s), true, &v, &d), AS_OK, "%s", d.msg);
    cr_assert(json_is_array(v));
    cr_assert_eq(json_array_size(v), 3);
    cr_assert_eq(json_integer_value(json_object_get(json_array_get(v, 1), "b")), 2);
    cr_assert(json_is_null(json_array_get(v, 2)), "an empty document is null");
    json_decref(v);
    fails(s, false, "more than one YAML document", "line 3");
}

Test(doc, json_detection)
{
    const char *s = "\xEF\xBB\xBF \n\t{\"kind\": \"List\", \"n\": 1.5, \"s\": \"2\"}";
    json_t *v = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(doc_parse(s, strlen(s), false, &v, &d), AS_OK, "%s", d.msg);
    cr_assert_str_eq(json_string_value(json_object_get(v, "kind")), "List");
    cr_assert(json_is_real(json_object_get(v, "n")));
    cr_assert(json_is_string(json_object_get(v, "s")));
    json_decref(v);
    cr_assert_eq(doc_parse(s, strlen(s), true, &v, &d), AS_OK, "%s", d.msg);
    cr_assert(json_is_array(v));
    cr_assert_eq(json_array_size(v), 1);
    json_decref(v);
    /* a top-level JSON array stays an array in single mode */
    v = ok1("[1, 2]");
    cr_assert_eq(json_array_size(v), 2);
    json_decref(v);
}

Test(doc, empty_input)
{
    json_t *v = NULL;
    cr_assert_eq(doc_parse("", 0, false, &v, NULL), AS_OK);
    cr_assert(json_is_null(v));
    json_decref(v);
    cr_assert_eq(doc_parse("# only a comment\n", 17, true, &v, NULL), AS_OK);
    cr_assert(json_is_array(v));
    cr_assert_eq(json_array_size(v), 0);
    json_decref(v);
}

Test(doc, length_not_nul)
{
    json_t *v = NULL;
    cr_assert_eq(doc_parse("a: 1\nb: [", 5, false, &v, NULL), AS_OK);
    cr_assert_eq(json_object_size(v), 1);
    json_decref(v);
}

Test(doc, invalid_utf8)
{
    const char s[] = "a: \xff\xfe\n";
    json_t *v = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(doc_parse(s, sizeof s - 1, false, &v, &d), AS_EPARSE);
    cr_expect(strstr(d.msg, "byte offset 3") != NULL, "%s", d.msg);
    cr_expect(strstr(d.msg, "UTF-8") != NULL, "%s", d.msg);
}

Test(doc, files)
{
    json_t *v = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(doc_load_file(TEST_DATA_DIR "/model/small.yaml", 0, false, &v, &d), AS_OK, "%s",
                 d.msg);
    cr_assert_eq(json_array_size(json_object_get(v, "b")), 2);
    json_decref(v);
    cr_assert_eq(doc_load_file(TEST_DATA_DIR "/model/small.json", 0, true, &v, &d), AS_OK);
    cr_assert_eq(json_array_size(v), 1);
    json_decref(v);
    cr_assert_eq(doc_load_file(TEST_DATA_DIR "/model/multi.yaml", 0, false, &v, &d), AS_EPARSE);
    cr_expect(strncmp(d.msg, TEST_DATA_DIR "/model/multi.yaml: line 3",
                      strlen(TEST_DATA_DIR "/model/multi.yaml: line 3")) == 0,
              "%s", d.msg);

    cr_assert_eq(doc_load_file(TEST_DATA_DIR "/model/missing.yaml", 0, false, &v, &d), AS_EIO);
    cr_expect(strstr(d.msg, "missing.yaml: cannot open") != NULL, "%s", d.msg);
    cr_assert_eq(doc_load_file(TEST_DATA_DIR "/model", 0, false, &v, &d), AS_EIO, "%s", d.msg);
    cr_assert_eq(doc_load_file(TEST_DATA_DIR "/model/small.yaml", 8, false, &v, &d), AS_ETOOBIG);
    cr_expect(strstr(d.msg, "limit of 8 bytes") != NULL, "%s", d.msg);

    char *data = NULL;
    size_t len = 0;
    cr_assert_eq(doc_read_file(TEST_DATA_DIR "/model/small.yaml", 0, &data, &len, &d), AS_OK);
    cr_assert_eq(len, 15);
    cr_assert_eq(data[len], '\0');
    free(data);
    /* exactly at the cap is fine */
    cr_assert_eq(doc_read_file(TEST_DATA_DIR "/model/small.yaml", 15, &data, &len, &d), AS_OK);
    free(data);
    /* a pipe-like file without a size: capped while reading */
    cr_assert_eq(doc_read_file("/dev/zero", 1000, &data, &len, &d), AS_ETOOBIG);
    cr_assert_null(data);
}

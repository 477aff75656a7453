/* test_extargs.c - the streaming decoders of the extender request bodies. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/api/extargs.h"
#include "agentsched/model/skip.h"
#include "json_fixtures.h"

/* The ExtenderArgs example of upstream's types_test.go, and its
 * lower-cased round trip (Go decodes keys case-insensitively). */
static const char *upstream_args =
    "{\"Pod\":{\"metadata\":{\"name\":\"podname\",\"creationTimestamp\":null},\"spec\":{"
    "\"containers\":null},\"status\":{}},\"Nodes\":{\"metadata\":{},\"items\":[{\"metadata\":{"
    "\"name\":\"nodename\",\"creationTimestamp\":null},\"spec\":{},\"status\":{"
    "\"daemonEndpoints\":{\"kubeletEndpoint\":{\"Port\":0}},\"nodeInfo\":{\"machineID\":\"\","
    "\"systemUUID\":\"\",\"bootID\":\"\",\"kernelVersion\":\"\",\"osImage\":\"\","
    "\"containerRuntimeVersion\":\"\",\"kubeletVersion\":\"\",\"kubeProxyVersion\":\"\","
    "\"operatingSystem\":\"\",\"architecture\":\"\"}}}]},\"NodeNames\":[\"node1\"]}";

static char *lower(const char *s)
{
    char *o = strdup(s);
    for (char *p = o; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    return o;
}

#define NAME64 "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"

static bool name_eq(sched_name n, const char *s)
{
    return n.len == strlen(s) && memcmp(n.s, s, n.len) == 0;
}

static as_err decode(const char *body, extargs_args *a, as_diag *d, pool **pp)
{
    *pp = pool_new(0);
    memset(d, 0, sizeof *d);
    return extargs_decode_args(*pp, body, strlen(body), a, d);
}

Test(extargs, upstream_example)
{
    for (int pass = 0; pass < 2; pass++) {
        char *body = pass ? lower(upstream_args) : strdup(upstream_args);
        extargs_args a;
        as_diag d;
        pool *p;
        cr_assert_eq(decode(body, &a, &d, &p), AS_OK, "%s: %s", d.field, d.msg);
        cr_assert(a.pod);
        cr_assert_str_eq(
            json_string_value(json_object_get(json_object_get(a.pod, "metadata"), "name")),
            "podname");
        cr_assert(a.has_node_names);
        cr_assert_eq(a.nnames, 1);
        cr_assert(name_eq(a.names[0], "node1"));
        cr_assert(a.has_nodes);
        cr_assert_eq(a.nnodes, 1);
        cr_assert(name_eq(a.nodes[0].name, "nodename"));
        /* the raw span is exactly the item object */
        json_t *item = json_loadb(a.nodes[0].raw, a.nodes[0].raw_len, 0, NULL);
        cr_assert(item, "raw span is not a JSON document: %.*s", (int)a.nodes[0].raw_len,
                  a.nodes[0].raw);
        cr_assert_eq(a.nodes[0].raw[0], '{');
        cr_assert_eq(a.nodes[0].raw[a.nodes[0].raw_len - 1], '}');
        json_decref(item);
        extargs_args_release(&a);
        pool_free(p);
        free(body);
    }
}

Test(extargs, names_only_and_nulls)
{
    extargs_args a;
    as_diag d;
    pool *p;
    cr_assert_eq(
        decode("{\"Pod\":null,\"Nodes\":null,\"NodeNames\":[\"a\",\"b\",\"c\"]}", &a, &d, &p),
        AS_OK);
    cr_assert_null(a.pod);
    cr_assert_not(a.has_nodes);
    cr_assert(a.has_node_names);
    cr_assert_eq(a.nnames, 3);
    cr_assert(name_eq(a.names[2], "c"));
    extargs_args_release(&a);
    pool_free(p);

    cr_assert_eq(decode("{\"NodeNames\":null}", &a, &d, &p), AS_OK);
    cr_assert_not(a.has_node_names);
    extargs_args_release(&a);
    pool_free(p);

    cr_assert_eq(decode("{\"NodeNames\":[]}", &a, &d, &p), AS_OK);
    cr_assert(a.has_node_names);
    cr_assert_eq(a.nnames, 0);
    extargs_args_release(&a);
    pool_free(p);
}

Test(extargs, case_insensitive_last_wins_and_unknown_keys)
{
    extargs_args a;
    as_diag d;
    pool *p;
    const char *body =
        "{\"x\":{\"deep\":[1,2,{\"NodeNames\":[\"no\"]}]},\"NODENAMES\":[\"first\"],"
        "\"nodeNames\":[\"second\",\"third\"],\"pOd\":{\"metadata\":{\"name\":\"p\"}},"
        "\"extra\":\"ignored\"}";
    cr_assert_eq(decode(body, &a, &d, &p), AS_OK, "%s", d.msg);
    cr_assert_eq(a.nnames, 2);
    cr_assert(name_eq(a.names[0], "second"));
    cr_assert(name_eq(a.names[1], "third"));
    cr_assert(a.pod);
    extargs_args_release(&a);
    pool_free(p);
}

Test(extargs, duplicates_dropped_in_order)
{
    extargs_args a;
    as_diag d;
    pool *p;
    cr_assert_eq(decode("{\"NodeNames\":[\"b\",\"a\",\"b\",\"c\",\"a\"]}", &a, &d, &p), AS_OK);
    cr_assert_eq(a.nnames, 3);
    cr_assert_eq(a.dup_names, 2);
    cr_assert(name_eq(a.names[0], "b"));
    cr_assert(name_eq(a.names[1], "a"));
    cr_assert(name_eq(a.names[2], "c"));
    extargs_args_release(&a);
    pool_free(p);

    cr_assert_eq(decode("{\"Nodes\":{\"items\":[{\"metadata\":{\"name\":\"x\"}},{\"metadata\":{"
                        "\"name\":\"y\"}},{\"metadata\":{\"name\":\"x\"},\"spec\":{}}]}}",
                        &a, &d, &p),
                 AS_OK);
    cr_assert_eq(a.nnodes, 2);
    cr_assert_eq(a.dup_nodes, 1);
    cr_assert(name_eq(a.nodes[1].name, "y"));
    cr_assert_eq(a.nodes[1].raw_len, strlen("{\"metadata\":{\"name\":\"y\"}}"));
    extargs_args_release(&a);
    pool_free(p);
}

Test(extargs, escaped_names_and_pod_values)
{
    extargs_args a;
    as_diag d;
    pool *p;
    const char *body =
        "{\"NodeNames\":[\"n\\u00e9\\\"q\"],\"Pod\":{\"a\":[1,-2,3.5,true,false,null,"
        "\"s\",{\"k\":{}}],\"big\":9007199254740993}}";
    cr_assert_eq(decode(body, &a, &d, &p), AS_OK, "%s", d.msg);
    cr_assert(name_eq(a.names[0], "n\xc3\xa9\"q"));
    json_t *want = json_loads("{\"a\":[1,-2,3.5,true,false,null,\"s\",{\"k\":{}}],"
                              "\"big\":9007199254740993}",
                              0, NULL);
    cr_assert(json_equal(a.pod, want));
    json_decref(want);
    extargs_args_release(&a);
    pool_free(p);
}

typedef struct bad_case {
    const char *body;
    as_err err;
    const char *field; /* NULL: do not check */
} bad_case;

Test(extargs, errors_name_the_field)
{
    static const bad_case cases[] = {
        {"", AS_EPARSE, ""},
        {"{", AS_EPARSE, ""},
        {"{\"NodeNames\":[\"a\",", AS_EPARSE, ""},
        {"[]", AS_EINVAL, ""},
        {"null", AS_EINVAL, ""},
        {"\"str\"", AS_EINVAL, ""},
        {"{\"Pod\":[]}", AS_EINVAL, "Pod"},
        {"{\"Pod\":\"x\"}", AS_EINVAL, "Pod"},
        {"{\"Pod\":1}", AS_EINVAL, "Pod"},
        {"{\"NodeNames\":\"a\"}", AS_EINVAL, "NodeNames"},
        {"{\"NodeNames\":{}}", AS_EINVAL, "NodeNames"},
        {"{\"NodeNames\":[\"a\",\"b\",\"c\",1]}", AS_EINVAL, "NodeNames[3]"},
        {"{\"NodeNames\":[\"a\",null]}", AS_EINVAL, "NodeNames[1]"},
        {"{\"NodeNames\":[[\"a\"]]}", AS_EINVAL, "NodeNames[0]"},
        {"{\"Nodes\":[]}", AS_EINVAL, "Nodes"},
        {"{\"Nodes\":{\"items\":{}}}", AS_EINVAL, "Nodes.items"},
        {"{\"Nodes\":{\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"}},"
         "{\"metadata\":{\"name\":7}}]}}",
         AS_EINVAL, "Nodes.items[2].metadata.name"},
        {"{\"Nodes\":{\"items\":[null]}}", AS_EINVAL, "Nodes.items[0]"},
        {"{\"Nodes\":{\"items\":[{\"metadata\":[]}]}}", AS_EINVAL, "Nodes.items[0].metadata"},
        {"{\"Nodes\":{\"items\":[{\"spec\":{}}]}}", AS_EINVAL, "Nodes.items[0].metadata.name"},
        {"{\"Nodes\":{\"items\":[{\"metadata\":{\"name\":\"\"}}]}}", AS_EINVAL,
         "Nodes.items[0].metadata.name"},
        {"{\"NodeNames\":[\"a\"]} x", AS_EPARSE, ""},
        {"{\"NodeNames\":[\"a\"]}{}", AS_EPARSE, ""},
        {"{\"NodeNames\":[\"\xff\xfe\"]}", AS_EPARSE, ""},
        {"{\"NodeNames\":[\"a\"],} ", AS_EPARSE, ""},
        {"{'NodeNames':['a']}", AS_EPARSE, ""},
        {"{\"NodeNames\":[\"a\"] /* c */}", AS_EPARSE, ""},
        {"{\"Pod\":{\"x\":99999999999999999999999}}", AS_EPARSE, ""},
        /* a key holding NUL, anywhere (in the Pod: see nul_in_keys_is_refused) */
        {"{\"NodeNames\":[],\"x\\u0000\":1}", AS_EINVAL, ""},
        {"{\"Nodes\":{\"items\":[{\"metadata\":{\"name\":\"a\",\"\\u0000\":1}}]}}", AS_EINVAL, ""},
        {"{\"Nodes\":{\"it\\u0000ems\":[]}}", AS_EINVAL, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        extargs_args a;
        as_diag d;
        pool *p;
        as_err err = decode(cases[i].body, &a, &d, &p);
        cr_expect_eq(err, cases[i].err, "case %zu (%s): got %s (%s: %s)", i, cases[i].body,
                     as_strerror(err), d.field, d.msg);
        if (cases[i].field)
            cr_expect_str_eq(d.field, cases[i].field, "case %zu: %s", i, d.msg);
        cr_expect_gt(strlen(d.msg), 10, "case %zu has no message", i);
        cr_expect_null(a.pod);
        pool_free(p);
    }
}

Test(extargs, nul_byte_is_a_syntax_error)
{
    static const char body[] = "{\"NodeNames\":[\"a\0b\"]}";
    pool *p = pool_new(0);
    extargs_args a;
    as_diag d = {0};
    cr_assert_eq(extargs_decode_args(p, body, sizeof body - 1, &a, &d), AS_EPARSE);
    pool_free(p);
    /* \u0000 inside a name is valid JSON, but no node name has one */
    p = pool_new(0);
    const char *esc = "{\"NodeNames\":[\"a\\u0000b\"]}";
    cr_assert_eq(extargs_decode_args(p, esc, strlen(esc), &a, &d), AS_EINVAL);
    cr_assert_str_eq(d.field, "NodeNames[0]");
    pool_free(p);
}

static char *repeat_nest(int depth, const char *prefix)
{
    size_t n = strlen(prefix) + (size_t)depth * 2 + 8;
    char *s = malloc(n);
    strcpy(s, prefix);
    size_t o = strlen(s);
    for (int i = 0; i < depth; i++)
        s[o++] = '[';
    for (int i = 0; i < depth; i++)
        s[o++] = ']';
    s[o++] = '}';
    s[o] = '\0';
    return s;
}

Test(extargs, depth_is_capped)
{
    extargs_args a;
    as_diag d;
    pool *p;
    char *ok = repeat_nest(JSON_MAX_DEPTH - 2, "{\"Pod\":{\"x\":");
    strcat(ok, "}");
    cr_assert_eq(decode(ok, &a, &d, &p), AS_OK, "%s", d.msg);
    extargs_args_release(&a);
    pool_free(p);
    free(ok);
    char *deep = repeat_nest(100000, "{\"skipped\":");
    cr_assert_eq(decode(deep, &a, &d, &p), AS_ETOOBIG);
    pool_free(p);
    free(deep);
    deep = repeat_nest(200, "{\"Pod\":{\"x\":");
    cr_assert_eq(decode(deep, &a, &d, &p), AS_ETOOBIG);
    pool_free(p);
    free(deep);
}

Test(extargs, many_names)
{
    size_t n = 10000;
    char *body = malloc(n * 16 + 64);
    size_t o = (size_t)sprintf(body, "{\"NodeNames\":[");
    for (size_t i = 0; i < n; i++)
        o += (size_t)sprintf(body + o, "%s\"node-%zu\"", i ? "," : "", i);
    strcpy(body + o, "]}");
    extargs_args a;
    as_diag d;
    pool *p;
    cr_assert_eq(decode(body, &a, &d, &p), AS_OK);
    cr_assert_eq(a.nnames, n);
    cr_assert(name_eq(a.names[9999], "node-9999"));
    extargs_args_release(&a);
    pool_free(p);
    free(body);

    n = EXTARGS_MAX_NAMES + 1;
    body = malloc(n * 4 + 64);
    o = (size_t)sprintf(body, "{\"NodeNames\":[");
    for (size_t i = 0; i < n; i++)
        o += (size_t)sprintf(body + o, "%s\"x\"", i ? "," : "");
    strcpy(body + o, "]}");
    cr_assert_eq(decode(body, &a, &d, &p), AS_ETOOBIG);
    cr_assert_str_eq(d.field, "NodeNames[65536]");
    pool_free(p);
    free(body);
}

/* The compact run of names ("a","b",...) is read apart from the general
 * element reader: every way a run can end or break gives the general
 * reader's result (names, or the error and its field). */
Test(extargs, names_runs_end_and_break_like_the_general_reader)
{
    char long_name[300];
    memset(long_name, 'n', 254);
    long_name[254] = '\0';
    char big[80000];
    size_t o = (size_t)sprintf(big, "{\"NodeNames\":[");
    for (int i = 0; i < 200; i++) /* past the names array's first growths */
        o += (size_t)sprintf(big + o, "%s\"n%d\"", i ? "," : "", i);
    strcpy(big + o, "]}");
    struct {
        const char *body;
        as_err err;
        const char *field; /* error */
        size_t n;          /* names, OK */
        const char *last;  /* the last name, OK */
    } cases[] = {
        {"{\"NodeNames\":[\"a\",\"b\",\"c\"]}", AS_OK, NULL, 3, "c"},
        {"{\"NodeNames\":[ \"a\" , \"b\",\"c\" ]}", AS_OK, NULL, 3, "c"},
        {"{\"NodeNames\":[\"a\",\"b\\u0063\",\"d\"]}", AS_OK, NULL, 3, "d"},
        {"{\"NodeNames\":[\"a\",\n\"b\"]}", AS_OK, NULL, 2, "b"},
        {"{\"NodeNames\":[\"a\",\"\"]}", AS_OK, NULL, 2, ""},
        {"{\"NodeNames\":[\"a\",\"b\"],\"Nodes\":null}", AS_OK, NULL, 2, "b"},
        {"{\"NodeNames\":[\"a\"\"b\"]}", AS_EPARSE, NULL, 0, NULL},
        {"{\"NodeNames\":[\"a\",\"b\",]}", AS_EPARSE, NULL, 0, NULL},
        {"{\"NodeNames\":[\"a\",\"b\"", AS_EPARSE, NULL, 0, NULL},
        {"{\"NodeNames\":[\"a\",\"b", AS_EPARSE, NULL, 0, NULL},
        {"{\"NodeNames\":[\"a\",\"b\x01\"]}", AS_EPARSE, NULL, 0, NULL},
        {"{\"NodeNames\":[\"a\",7]}", AS_EINVAL, "NodeNames[1]", 0, NULL},
        {"{\"NodeNames\":[\"a\",\"\\u0000\"]}", AS_EINVAL, "NodeNames[1]", 0, NULL},
        {"{\"NodeNames\":[\"a\",\"\xc3\xa9\"]}", AS_OK, NULL, 2, "\xc3\xa9"},
        {"{\"NodeNames\":[\"a\",\"\xc3\"]}", AS_EPARSE, NULL, 0, NULL},
        {big, AS_OK, NULL, 200, "n199"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        extargs_args a;
        as_diag d;
        pool *p;
        as_err err = decode(cases[k].body, &a, &d, &p);
        cr_assert_eq(err, cases[k].err, "case %zu: %d (%s)", k, err, d.msg);
        if (err == AS_OK) {
            cr_assert_eq(a.nnames, cases[k].n, "case %zu", k);
            cr_assert(name_eq(a.names[a.nnames - 1], cases[k].last), "case %zu", k);
            for (size_t i = 0; i < a.nnames; i++)
                cr_assert_eq(a.names[i].hash, cache_name_hash(a.names[i].s, a.names[i].len));
            extargs_args_release(&a);
        } else if (cases[k].field) {
            cr_assert_str_eq(d.field, cases[k].field, "case %zu", k);
        }
        pool_free(p);
    }
    /* a name one byte too long in the middle of a run */
    snprintf(big, sizeof big, "{\"NodeNames\":[\"a\",\"%s\",\"c\"]}", long_name);
    extargs_args a;
    as_diag d;
    pool *p;
    cr_assert_eq(decode(big, &a, &d, &p), AS_EINVAL);
    cr_assert_str_eq(d.field, "NodeNames[1]");
    pool_free(p);
}

Test(extargs, long_name_and_key)
{
    char body[6000];
    char name[300];
    memset(name, 'n', 254);
    name[254] = '\0';
    snprintf(body, sizeof body, "{\"NodeNames\":[\"%s\"]}", name);
    extargs_args a;
    as_diag d;
    pool *p;
    cr_assert_eq(decode(body, &a, &d, &p), AS_EINVAL);
    cr_assert_str_eq(d.field, "NodeNames[0]");
    pool_free(p);
    char key[4200];
    memset(key, 'k', 4100);
    key[4100] = '\0';
    snprintf(body, sizeof body, "{\"Pod\":{\"%s\":1}}", key);
    cr_assert_eq(decode(body, &a, &d, &p), AS_ETOOBIG);
    pool_free(p);
}

Test(extargs, pool_cap_is_honoured)
{
    pool *p = pool_new(8192);
    char body[4096];
    size_t o = (size_t)sprintf(body, "{\"NodeNames\":[");
    for (int i = 0; i < 300; i++)
        o += (size_t)sprintf(body + o, "%s\"n%d\"", i ? "," : "", i);
    strcpy(body + o, "]}");
    extargs_args a;
    as_diag d = {0};
    cr_assert_eq(extargs_decode_args(p, body, strlen(body), &a, &d), AS_ENOMEM);
    pool_free(p);
}

Test(extargs, binding)
{
    static const char *up =
        "{\"PodName\":\"mypodname\",\"PodNamespace\":\"mypodnamespace\",\"PodUID\":\"mypoduid\","
        "\"Node\":\"mynode\"}";
    for (int pass = 0; pass < 2; pass++) {
        char *body = pass ? lower(up) : strdup(up);
        pool *p = pool_new(0);
        extargs_binding b;
        as_diag d = {0};
        cr_assert_eq(extargs_decode_binding(p, body, strlen(body), &b, &d), AS_OK, "%s", d.msg);
        cr_assert_str_eq(b.pod_name, "mypodname");
        cr_assert_str_eq(b.pod_namespace, "mypodnamespace");
        cr_assert_str_eq(b.pod_uid, "mypoduid");
        cr_assert_str_eq(b.node, "mynode");
        pool_free(p);
        free(body);
    }
    static const bad_case bad[] = {
        {"{\"PodName\":\"p\"}", AS_EINVAL, "Node"},
        {"{\"Node\":\"n\"}", AS_EINVAL, "PodName"},
        {"{\"PodName\":1,\"Node\":\"n\"}", AS_EINVAL, "PodName"},
        {"{\"PodName\":\"p\",\"Node\":\"n\",\"PodUID\":[]}", AS_EINVAL, "PodUID"},
        {"{\"PodName\":\"p\",\"Node\":{}}", AS_EINVAL, "Node"},
        {"[]", AS_EINVAL, ""},
        {"{\"PodName\":\"p\"", AS_EPARSE, ""},
        /* NUL would cut a field short: "n\u0000x" is not node n */
        {"{\"PodName\":\"p\",\"Node\":\"n\\u0000x\"}", AS_EINVAL, "Node"},
        {"{\"PodName\":\"p\\u0000\",\"Node\":\"n\"}", AS_EINVAL, "PodName"},
        {"{\"PodName\":\"p\",\"PodNamespace\":\"\\u0000\",\"Node\":\"n\"}", AS_EINVAL,
         "PodNamespace"},
        {"{\"PodName\":\"p\",\"PodUID\":\"u\\u0000\",\"Node\":\"n\"}", AS_EINVAL, "PodUID"},
        {"{\"PodName\":\"p\",\"Node\\u0000\":\"m\",\"Node\":\"n\"}", AS_EINVAL, ""},
        /* strict UTF-8 (yajl alone takes these) */
        {"{\"PodName\":\"p\",\"Node\":\"\xc0\xaf\"}", AS_EPARSE, ""},
        {"{\"PodName\":\"\xed\xa0\x80\",\"Node\":\"n\"}", AS_EPARSE, ""},
        {"{\"PodName\":\"p\",\"PodUID\":\"\xf4\x90\x80\x80\",\"Node\":\"n\"}", AS_EPARSE, ""},
        {"{\"PodName\":\"p\",\"\xed\xbf\xbf\":1,\"Node\":\"n\"}", AS_EPARSE, ""},
        /* Kubernetes' name limits */
        {"{\"PodName\":\"p\",\"PodNamespace\":\"" NAME64 "\",\"Node\":\"n\"}", AS_EINVAL,
         "PodNamespace"},
        {"{\"PodName\":\"" NAME64 NAME64 NAME64 NAME64 "\",\"Node\":\"n\"}", AS_EINVAL, "PodName"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pool *p = pool_new(0);
        extargs_binding b;
        as_diag d = {0};
        cr_expect_eq(extargs_decode_binding(p, bad[i].body, strlen(bad[i].body), &b, &d),
                     bad[i].err, "case %zu", i);
        cr_expect_str_eq(d.field, bad[i].field, "case %zu: %s", i, d.msg);
        pool_free(p);
    }
    pool *p = pool_new(0);
    extargs_binding b;
    as_diag d = {0};
    const char *nons = "{\"podname\":\"p\",\"node\":\"n\",\"podnamespace\":null}";
    cr_assert_eq(extargs_decode_binding(p, nons, strlen(nons), &b, &d), AS_OK);
    cr_assert_str_eq(b.pod_namespace, "default");
    cr_assert_str_eq(b.pod_uid, "");
    pool_free(p);
}

Test(extargs, preemption_upstream_example)
{
    static const char *up =
        "{\"Pod\":{\"metadata\":{\"name\":\"podname\",\"creationTimestamp\":null},\"spec\":{"
        "\"containers\":null},\"status\":{}},\"NodeNameToVictims\":{\"foo\":{\"Pods\":[{"
        "\"metadata\":{\"name\":\"podname\",\"creationTimestamp\":null},\"spec\":{\"containers\":"
        "null},\"status\":{}}],\"NumPDBViolations\":1}},\"NodeNameToMetaVictims\":{\"foo\":{"
        "\"Pods\":[{\"UID\":\"myuid\"}],\"NumPDBViolations\":1}}}";
    for (int pass = 0; pass < 2; pass++) {
        char *body = pass ? lower(up) : strdup(up);
        pool *p = pool_new(0);
        extargs_preemption a;
        as_diag d = {0};
        cr_assert_eq(extargs_decode_preemption(p, body, strlen(body), &a, &d), AS_OK, "%s", d.msg);
        cr_assert(a.pod);
        cr_assert(a.meta);
        cr_assert_eq(a.nentries, 1);
        cr_assert_str_eq(a.entries[0].node, "foo");
        cr_assert_eq(a.entries[0].npods, 1);
        cr_assert_str_eq(a.entries[0].uids[0], "myuid");
        cr_assert_eq(a.entries[0].num_pdb_violations, 1);
        extargs_preemption_release(&a);
        pool_free(p);
        free(body);
    }
}

Test(extargs, preemption_full_victims)
{
    const char *body = "{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNameToVictims\":{"
                       "\"a\":{\"Pods\":[{\"metadata\":{\"name\":\"v1\",\"uid\":\"u1\"}},"
                       "{\"metadata\":{\"name\":\"v2\"}}],\"NumPDBViolations\":0},\"b\":null},"
                       "\"NodeNameToMetaVictims\":null}";
    pool *p = pool_new(0);
    extargs_preemption a;
    as_diag d = {0};
    cr_assert_eq(extargs_decode_preemption(p, body, strlen(body), &a, &d), AS_OK, "%s", d.msg);
    cr_assert_not(a.meta);
    cr_assert_eq(a.entries[0].num_pdb_violations, 0);
    cr_assert_eq(a.nentries, 2);
    cr_assert_eq(a.entries[0].npods, 2);
    cr_assert_str_eq(a.entries[0].uids[0], "u1");
    cr_assert_str_eq(a.entries[0].uids[1], "");
    cr_assert(a.entries[0].pods[1]);
    cr_assert_eq(a.entries[1].npods, 0);
    extargs_preemption_release(&a);
    pool_free(p);

    static const bad_case bad[] = {
        {"{\"Pod\":7}", AS_EINVAL, "Pod"},
        {"{\"NodeNameToMetaVictims\":[]}", AS_EINVAL, "NodeNameToMetaVictims"},
        {"{\"NodeNameToMetaVictims\":{\"n\":1}}", AS_EINVAL, "NodeNameToMetaVictims.n"},
        {"{\"NodeNameToMetaVictims\":{\"n\":{\"Pods\":{}}}}", AS_EINVAL,
         "NodeNameToMetaVictims.n.Pods"},
        {"{\"NodeNameToMetaVictims\":{\"n\":{\"Pods\":[{\"UID\":5}]}}}", AS_EINVAL,
         "NodeNameToMetaVictims.n.Pods[0].UID"},
        {"{\"NodeNameToMetaVictims\":{\"n\":{\"NumPDBViolations\":\"1\"}}}", AS_EINVAL,
         "NodeNameToMetaVictims.n.NumPDBViolations"},
        {"{\"NodeNameToVictims\":{\"n\":{\"Pods\":[\"x\"]}}}", AS_EINVAL,
         "NodeNameToVictims.n.Pods[0]"},
        {"{\"NodeNameToMetaVictims\":{\"\":{}}}", AS_EINVAL, "NodeNameToMetaVictims."},
        {"{\"NodeNameToMetaVictims\":{\"n\":{\"NumPDBViolations\":-1}}}", AS_EINVAL,
         "NodeNameToMetaVictims.n.NumPDBViolations"},
        {"{\"NodeNameToMetaVictims\":{\"n\\u0000x\":{}}}", AS_EINVAL, "NodeNameToMetaVictims"},
        {"{\"NodeNameToMetaVictims\":{\"n\":{\"Pods\":[{\"UID\":\"u\\u0000\"}]}}}", AS_EINVAL,
         "NodeNameToMetaVictims.n.Pods[0].UID"},
        {"{\"NodeNameToVictims\":{\"n\":{\"Pods\":[{\"metadata\":{\"uid\":\"\\u0000u\"}}]}}}",
         AS_EINVAL, "NodeNameToVictims.n.Pods[0].metadata.uid"},
        {"{\"NodeNameToMetaVictims\":{\"n\":{\"Pods\":[{\"UID\":\"\xc0\xaf\"}]}}}", AS_EPARSE, ""},
        {"{\"NodeNameToMetaVictims\":{\"\xf4\x90\x80\x80\":{}}}", AS_EPARSE, ""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = pool_new(0);
        cr_expect_eq(extargs_decode_preemption(p, bad[i].body, strlen(bad[i].body), &a, &d),
                     bad[i].err, "case %zu", i);
        cr_expect_str_eq(d.field, bad[i].field, "case %zu: %s", i, d.msg);
        cr_expect_null(a.doc);
        pool_free(p);
    }
}

/* The scanner notes the text of the Pod's top-level spec (the memo key of
 * decoded specs): only an object, the last one, and none when a top-level
 * key had an escape (it may spell "spec"). */
Test(extargs, pod_spec_span)
{
    static const struct {
        const char *body, *want; /* want NULL: no span */
    } cases[] = {
        {"{\"Pod\":{\"metadata\":{\"spec\":{}},\"spec\":{\"a\":[1,{\"b\":\"}\"}]} ,\"status\":{}}}",
         "{\"a\":[1,{\"b\":\"}\"}]}"},
        {"{\"Pod\":{\"spec\":{\"a\":1},\"spec\":{ \"a\" : 2 }}}", "{ \"a\" : 2 }"},
        {"{\"Pod\":{\"spec\":null}}", NULL},
        {"{\"Pod\":{\"spec\":{\"a\":1},\"spec\":null}}", NULL},
        {"{\"Pod\":{\"metadata\":{}}}", NULL},
        {"{\"Pod\":{\"spec\":{\"a\":1},\"sp\\u0065c\":{\"a\":2}}}", NULL},
        {"{\"Pod\":{\"m\\u0065\":{},\"spec\":{\"a\":1}}}", NULL},
        {"{\"Pod\":null}", NULL},
        {"{\"Spec\":{\"a\":1},\"Pod\":{\"Spec\":{\"a\":1}}}", NULL},
    };
    pool *p = pool_new(0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (unsigned flags = 0; flags <= EXTARGS_LAZY_POD; flags += EXTARGS_LAZY_POD) {
            extargs_args a;
            as_diag d = {0};
            const char *b = cases[i].body;
            cr_assert_eq(extargs_decode_args_ex(p, b, strlen(b), flags, &a, &d), AS_OK,
                         "case %zu: %s", i, d.msg);
            if (!cases[i].want) {
                cr_assert_null(a.pod_spec_raw, "case %zu", i);
            } else {
                cr_assert_not_null(a.pod_spec_raw, "case %zu", i);
                cr_assert_eq(a.pod_spec_len, strlen(cases[i].want), "case %zu", i);
                cr_assert(!memcmp(a.pod_spec_raw, cases[i].want, a.pod_spec_len), "case %zu: %.*s",
                          i, (int)a.pod_spec_len, a.pod_spec_raw);
            }
            extargs_args_release(&a);
        }
    }
    pool_free(p);
}

/* The extender's lazy Pod: built on demand, with or without rules; a DOM
 * already built is not rebuilt. */
Test(extargs, parse_pod_lazy_with_rules)
{
    static const char *const ctr_keys[] = {"env", NULL};
    static const json_skip rules[] = {{"containers", ctr_keys}, {NULL, NULL}};
    static const char *body =
        "{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":"
        "\"c\",\"env\":[{\"name\":\"E\",\"value\":\"v\"}]}]}},\"NodeNames\":[\"n\"]}";
    pool *p = pool_new(0);
    extargs_args a;
    as_diag d = {0};
    cr_assert_eq(extargs_decode_args_ex(p, body, strlen(body), EXTARGS_LAZY_POD, &a, &d), AS_OK);
    cr_assert_null(a.pod);
    cr_assert_eq(extargs_parse_pod(&a, rules, &d), AS_OK, "%s", d.msg);
    json_t *c = json_array_get(json_object_get(json_object_get(a.pod, "spec"), "containers"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(c, "name")), "c");
    cr_assert_null(json_object_get(c, "env"), "env is left out");
    json_t *built = a.pod;
    cr_assert_eq(extargs_parse_pod(&a, NULL, &d), AS_OK);
    cr_assert_eq(a.pod, built, "built once");
    extargs_args_release(&a);

    cr_assert_eq(extargs_decode_args_ex(p, body, strlen(body), EXTARGS_LAZY_POD, &a, &d), AS_OK);
    cr_assert_eq(extargs_parse_pod(&a, NULL, &d), AS_OK);
    c = json_array_get(json_object_get(json_object_get(a.pod, "spec"), "containers"), 0);
    cr_assert_not_null(json_object_get(c, "env"), "no rules: the whole Pod");
    extargs_args_release(&a);

    /* no Pod: nothing to build */
    cr_assert_eq(extargs_decode_args_ex(p, "{\"Pod\":null}", 12, EXTARGS_LAZY_POD, &a, &d), AS_OK);
    cr_assert_eq(extargs_parse_pod(&a, rules, &d), AS_OK);
    cr_assert_null(a.pod);
    extargs_args_release(&a);
    pool_free(p);
}

/* extargs_parse_pod builds the scanner-validated Pod span by walking it
 * again (no second yajl pass): the same trees and the same errors as the
 * yajl builder, with and without rules, on what is hard to walk. */
Test(extargs, parse_pod_walk_matches_yajl)
{
    static const char *const ctr_keys[] = {"env", "args", NULL};
    static const json_skip rules[] = {{"containers", ctr_keys}, {NULL, NULL}};
    static const char *const pods[] = {
        "{}",
        "{ \"a\" : [ ] , \"b\" : { } , \"c\" : [ [ ] , { } , [ [ 1 ] ] ] }",
        "{\"n\":[0,-0,1,-1,9223372036854775807,-9223372036854775807,1.5,-2.25e3,1E-2,"
        "0.1e+2,1e-400,123456789012345678901234567890.5]}",
        "{\"s\":[\"\",\"plain\",\"q\\\"uote\",\"b\\\\s\",\"\\/\\b\\f\\n\\r\\t\","
        "\"\\u00e9\\u20ac\\ud83d\\ude00\",\"\\u0000x\",\"caf\xc3\xa9 \xe2\x82\xac\"]}",
        "{\"k\\\"ey\":1,\"\\u006bey\":2,\"dup\":1,\"dup\":[2]}",
        "{\"t\":true,\"f\":false,\"z\":null,\"x\":[true,false,null]}",
        /* left-out members with brackets, quotes and escapes in strings */
        "{\"spec\":{\"containers\":[{\"name\":\"c\",\"env\":[{\"value\":\"a]}\\\"[{\"},"
        "{\"v\":[[],{}]}],\"args\":\"}\",\"image\":\"i\"},{\"args\":-1.5e3,\"env\":null,"
        "\"x\":true},{\"env\":7}]}}",
        "{\"containers\":[{\"env\":{\"a\":{\"b\":[\"\\\\\",\"\\\\\\\"\"]}},\"keep\":1}]}",
        /* errors: out-of-range numbers, as yajl reports them */
        "{\"i\":9223372036854775808}",
        "{\"i\":-9223372036854775808}",
        "{\"i\":[1,99999999999999999999999]}",
        "{\"d\":1e400}",
        "{\"d\":-1e400}",
        "{\"containers\":[{\"env\":1e400,\"x\":1}]}",
    };
    for (size_t i = 0; i < sizeof pods / sizeof pods[0]; i++) {
        char body[1024];
        snprintf(body, sizeof body, "{\"Pod\":%s,\"NodeNames\":[]}", pods[i]);
        for (int r = 0; r < 2; r++) {
            const json_skip *sk = r ? rules : NULL;
            pool *p = pool_new(0);
            extargs_args a;
            as_diag d = {0}, yd = {0};
            cr_assert_eq(extargs_decode_args_ex(p, body, strlen(body), EXTARGS_LAZY_POD, &a, &d),
                         AS_OK, "pod %zu: %s", i, d.msg);
            json_t *y = NULL;
            as_err werr = extargs_parse_pod(&a, sk, &d);
            as_err yerr = json_parse_ref(pods[i], strlen(pods[i]), sk, &y, &yd);
            cr_assert_eq(werr, yerr, "pod %zu rules %d: walk %s (%s), yajl %s (%s)", i, r,
                         as_strerror(werr), d.msg, as_strerror(yerr), yd.msg);
            if (!werr) {
                char *g = json_dumps(a.pod, JSON_COMPACT | JSON_SORT_KEYS);
                char *w = json_dumps(y, JSON_COMPACT | JSON_SORT_KEYS);
                cr_assert(json_equal(a.pod, y), "pod %zu rules %d:\n walk %s\n yajl %s", i, r, g,
                          w);
                free(g);
                free(w);
            } else {
                cr_assert_null(a.pod);
                cr_assert(strstr(d.msg, "overflow"), "pod %zu: %s", i, d.msg);
            }
            if (y)
                json_decref(y);
            extargs_args_release(&a);
            pool_free(p);
        }
    }
}

/* The string scans read 16 bytes a step (8 without SSE2) and finish the
 * last bytes of a document word by word: a special byte (closing quote,
 * escape, two- and three-byte UTF-8, DEL, an invalid control character or
 * byte) at every offset of strings of every length up to 48, the string
 * ending the document or followed by more, through the request scanner
 * (a NodeNames name, compared with jansson) and through the walk
 * (json_parse, compared with yajl's builder). */
Test(extargs, string_scans_at_every_offset_and_length)
{
    static const struct {
        const char *bytes; /* inserted at the offset */
        bool valid;
    } special[] = {
        {"", true},
        {"\\\"", true},
        {"\\\\", true},
        {"\\u00e9", true},
        {"\xc3\xa9", true},
        {"\xe2\x98\x83", true},
        {"\x7f", true},
        {"/", true},
        {"\x01", false},
        {"\x1f", false},
        {"\xff", false},
        {"\xc3", false},
        {"\\q", false},
        /* valid structure, invalid UTF-8: overlong, surrogate, past U+10FFFF */
        {"\xc0\xaf", false},
        {"\xed\xa0\x80", false},
        {"\xf4\x90\x80\x80", false},
    };
    char str[128], body[256];
    for (size_t si = 0; si < sizeof special / sizeof special[0]; si++) {
        for (size_t len = 0; len <= 48; len++) {
            for (size_t at = 0; at <= len; at++) {
                size_t sl = strlen(special[si].bytes);
                memset(str, 'n', len);
                memcpy(str + at, special[si].bytes, sl);
                memset(str + at + sl, 'm', len - at);
                size_t n = len + sl;
                str[n] = '\0';
                for (int tail = 0; tail < 2; tail++) {
                    /* the name as a NodeNames entry */
                    int bl = snprintf(body, sizeof body, "{\"NodeNames\":[\"%s\"%s]}", str,
                                      tail ? ",\"z\"" : "");
                    pool *p = pool_new(0);
                    extargs_args a;
                    as_diag d = {0};
                    as_err err = extargs_decode_args(p, body, (size_t)bl, &a, &d);
                    json_t *ref = json_loadb(body, (size_t)bl, 0, NULL);
                    cr_assert_eq(err == AS_OK, special[si].valid && ref != NULL,
                                 "special %zu len %zu at %zu tail %d: %s", si, len, at, tail,
                                 d.msg);
                    if (!err) {
                        json_t *nm = json_array_get(json_object_get(ref, "NodeNames"), 0);
                        cr_assert(a.nnames >= 1);
                        cr_assert_eq(a.names[0].len, json_string_length(nm),
                                     "special %zu len %zu at %zu", si, len, at);
                        cr_assert(memcmp(a.names[0].s, json_string_value(nm), a.names[0].len) == 0);
                        extargs_args_release(&a);
                    }
                    if (ref)
                        json_decref(ref);
                    pool_free(p);
                    /* the string as a whole document, and as an array item */
                    bl = snprintf(body, sizeof body, tail ? "[\"%s\",1]" : "\"%s\"", str);
                    json_t *w = NULL, *y = NULL;
                    as_diag wd = {0}, yd = {0};
                    as_err we = json_parse(body, (size_t)bl, &w, &wd);
                    as_err ye = json_parse_ref(body, (size_t)bl, NULL, &y, &yd);
                    cr_assert_eq(we, ye, "special %zu len %zu at %zu: walk %s, yajl %s", si, len,
                                 at, wd.msg, yd.msg);
                    cr_assert_eq(we == AS_OK, special[si].valid);
                    if (!we)
                        cr_assert(json_equal(w, y), "special %zu len %zu at %zu", si, len, at);
                    else
                        cr_assert_str_eq(wd.msg, yd.msg);
                    if (w)
                        json_decref(w);
                    if (y)
                        json_decref(y);
                }
            }
        }
    }
}

/* Every decoder holds strings and keys to strict UTF-8, whether its text
 * reaches yajl or not: the scanner's verbs, the walk and yajl's builder
 * alike, in the same words. */
Test(extargs, strict_utf8_in_every_decoder)
{
    static const char *const bad[] = {"\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80"};
    char body[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (int key = 0; key < 2; key++) {
            /* a document, through the walk and through yajl alone */
            snprintf(body, sizeof body, key ? "{\"a\":{\"%s\":1}}" : "{\"a\":[\"x%s\"]}", bad[i]);
            json_t *w = NULL, *y = NULL;
            as_diag wd = {0}, yd = {0};
            cr_expect_eq(json_parse(body, strlen(body), &w, &wd), AS_EPARSE, "%zu/%d", i, key);
            cr_expect_eq(json_parse_ref(body, strlen(body), NULL, &y, &yd), AS_EPARSE);
            cr_expect_str_eq(wd.msg, yd.msg);
            cr_expect(strstr(wd.msg, "invalid UTF-8"), "%s", wd.msg);
            cr_expect(strstr(wd.msg, key ? "byte 7:" : "byte 8:"), "%s", wd.msg);
            cr_expect_null(w);
            cr_expect_null(y);
            /* inside the ExtenderArgs Pod */
            snprintf(body, sizeof body,
                     key ? "{\"Pod\":{\"x\":{\"%s\":1}},\"NodeNames\":[]}"
                         : "{\"Pod\":{\"x\":\"%s\"},\"NodeNames\":[]}",
                     bad[i]);
            extargs_args a;
            pool *p;
            as_diag d;
            cr_expect_eq(decode(body, &a, &d, &p), AS_EPARSE, "%s", d.msg);
            pool_free(p);
            /* binding and preemption args */
            snprintf(body, sizeof body,
                     key ? "{\"PodName\":\"p\",\"Node\":\"n\",\"%s\":1}"
                         : "{\"PodName\":\"p\",\"Node\":\"n%s\"}",
                     bad[i]);
            p = pool_new(0);
            extargs_binding b;
            cr_expect_eq(extargs_decode_binding(p, body, strlen(body), &b, &d), AS_EPARSE, "%s",
                         d.msg);
            snprintf(body, sizeof body,
                     key ? "{\"NodeNameToMetaVictims\":{\"%s\":{}}}"
                         : "{\"NodeNameToMetaVictims\":{\"n\":{\"Pods\":[{\"UID\":\"%s\"}]}}}",
                     bad[i]);
            extargs_preemption pr;
            cr_expect_eq(extargs_decode_preemption(p, body, strlen(body), &pr, &d), AS_EPARSE, "%s",
                         d.msg);
            pool_free(p);
        }
    }
}

/* A key holding NUL (an escaped zero code point) never reaches a DOM: the
 * builder refuses it, by the walk and by yajl alike, naming the object
 * that holds it; the extender's Pod prefixes its fields "Pod". */
Test(extargs, nul_in_keys_is_refused)
{
    static const char *const ctr_keys[] = {"env", NULL};
    static const json_skip rules[] = {{"containers", ctr_keys}, {NULL, NULL}};
    static const struct {
        const char *pod, *field;
    } cases[] = {
        {"{\"spec\":{\"nodeSelector\":{\"kubernetes.io/hostname\\u0000x\":\"n1\"}}}",
         "spec.nodeSelector"},
        {"{\"spec\":{\"containers\":[{\"name\":\"a\"},{\"resources\":{\"requests\":{"
         "\"cpu\\u0000x\":\"1\"}}}]}}",
         "spec.containers[1].resources.requests"},
        {"{\"\\u0000\":1}", ""},
        {"{\"metadata\":{\"labels\":{\"\\u0000\":\"v\"}},\"a\":[[{\"b\\u0000\":1}]]}",
         "metadata.labels"},
        {"{\"a\":[[{\"b\\u0000\":1}]]}", "a[0][0]"},
        {"{\"a\":{\"x\":1},\"a\":{\"k\\u0000\":1}}", "a"},
    };
    char body[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *pod = cases[i].pod;
        char want[128];
        snprintf(want, sizeof want, "Pod%s%s", cases[i].field[0] ? "." : "", cases[i].field);
        snprintf(body, sizeof body, "{\"Pod\":%s,\"NodeNames\":[]}", pod);
        /* built at decode */
        extargs_args a;
        pool *p;
        as_diag d;
        cr_expect_eq(decode(body, &a, &d, &p), AS_EINVAL, "case %zu: %s", i, d.msg);
        cr_expect_str_eq(d.field, want, "case %zu: %s", i, d.msg);
        cr_expect(strstr(d.msg, "\\u0000"), "case %zu: %s", i, d.msg);
        pool_free(p);
        /* built on demand, with and without rules */
        for (int r = 0; r < 2; r++) {
            p = pool_new(0);
            memset(&d, 0, sizeof d);
            cr_assert_eq(extargs_decode_args_ex(p, body, strlen(body), EXTARGS_LAZY_POD, &a, &d),
                         AS_OK, "%s", d.msg);
            cr_expect_eq(extargs_parse_pod(&a, r ? rules : NULL, &d), AS_EINVAL, "case %zu", i);
            cr_expect_str_eq(d.field, want, "case %zu rules %d: %s", i, r, d.msg);
            cr_expect_null(a.pod);
            extargs_args_release(&a);
            pool_free(p);
        }
        /* as a document: walk and yajl agree, field and words */
        json_t *w = NULL, *y = NULL;
        as_diag wd = {0}, yd = {0};
        cr_expect_eq(json_parse(pod, strlen(pod), &w, &wd), AS_EINVAL, "case %zu", i);
        cr_expect_eq(json_parse_ref(pod, strlen(pod), NULL, &y, &yd), AS_EINVAL);
        cr_expect_str_eq(wd.field, cases[i].field, "case %zu: %s", i, wd.msg);
        cr_expect_str_eq(yd.field, cases[i].field, "case %zu: %s", i, yd.msg);
        cr_expect_str_eq(wd.msg, yd.msg, "case %zu", i);
        cr_expect_null(w);
        cr_expect_null(y);
    }
    /* escapes that are not NUL pass */
    const char *esc = "{\"Pod\":{},\"a\\\\u0000\":1,\"\\u0001\\\\\\u00e9\":2,\"NodeNames\":[]}";
    extargs_args a;
    pool *p;
    as_diag ed;
    cr_expect_eq(decode(esc, &a, &ed, &p), AS_OK, "%s", ed.msg);
    extargs_args_release(&a);
    pool_free(p);
    /* a member the rules leave out is never built, so its keys are not
     * read either; NUL in values is data (the readers check it) */
    const char *ok = "{\"spec\":{\"containers\":[{\"env\":{\"a\\u0000\":1}}]},\"v\":\"a\\u0000\"}";
    json_t *w = NULL;
    as_diag d = {0};
    cr_expect_eq(json_parse_skip(ok, strlen(ok), rules, &w, &d), AS_OK, "%s", d.msg);
    cr_expect_eq(json_string_length(json_object_get(w, "v")), 2);
    json_decref(w);
}

/* ---- a Pod's fields without its DOM --------------------------------- */

/* same_pods: two decodes of one Pod agree on everything a pod holds. */
static void same_pods(const model_pod *a, const model_pod *b, const char *what)
{
    cr_assert_str_eq(a->name, b->name, "%s", what);
    cr_assert_str_eq(a->ns, b->ns, "%s", what);
    cr_assert_str_eq(a->uid, b->uid, "%s", what);
    cr_assert_str_eq(a->resource_version, b->resource_version, "%s", what);
    cr_assert_str_eq(a->scheduler_name, b->scheduler_name, "%s", what);
    cr_assert_eq(a->labels.n, b->labels.n, "%s", what);
    for (uint32_t i = 0; i < a->labels.n; i++) {
        cr_assert_str_eq(a->labels.items[i].key, b->labels.items[i].key, "%s", what);
        cr_assert_str_eq(a->labels.items[i].value, b->labels.items[i].value, "%s", what);
    }
    cr_assert_eq(a->terminating, b->terminating, "%s", what);
    cr_assert_eq(a->created_ms, b->created_ms, "%s", what);
    cr_assert_eq(a->phase, b->phase, "%s", what);
    cr_assert_eq(a->spec, b->spec, "%s", what);
    cr_assert(memcmp(&a->req, &b->req, sizeof a->req) == 0, "%s", what);
    cr_assert_eq(a->req_mask, b->req_mask, "%s", what);
    cr_assert_eq(a->priority, b->priority, "%s", what);
}

/* fields_vs_dom decodes pod (a Pod's JSON) both ways around the spec
 * decoded from its own spec, as the extender does on a spec memo hit:
 * when the fields path builds a pod, the DOM path builds the same one;
 * when the DOM path does, the fields path builds it too when plain is set,
 * or gives way (AS_EUNSUPPORTED); it never fails another way. Returns
 * whether the DOM path succeeded. */
static bool fields_vs_dom(model_registry *reg, const char *pod, bool plain)
{
    char *body = NULL;
    cr_assert(asprintf(&body, "{\"Pod\":%s,\"NodeNames\":[]}", pod) > 0);
    pool *p = pool_new(0);
    extargs_args a;
    as_diag d = {{0}, {0}};
    cr_assert_eq(extargs_decode_args_ex(p, body, strlen(body), EXTARGS_LAZY_POD, &a, &d), AS_OK,
                 "%s: %s", pod, d.msg);
    if (!a.pod_spec_raw) {
        /* an escaped top-level key: no spec span, so no spec memo and no
         * fields path (the extender decodes the whole Pod) */
        cr_assert(!plain, "%s", pod);
        model_pod *whole = NULL;
        as_err we = extargs_parse_pod(&a, NULL, &d);
        if (!we)
            we = model_pod_from_json(reg, a.pod, &whole, &d);
        model_pod_free(whole);
        extargs_args_release(&a);
        pool_free(p);
        free(body);
        return we == AS_OK;
    }
    json_t *spec_dom = NULL;
    cr_assert_eq(json_parse_skip(a.pod_spec_raw, a.pod_spec_len, NULL, &spec_dom, &d), AS_OK);
    model_pod_spec *spec = NULL;
    cr_assert_eq(model_pod_spec_from_json(reg, spec_dom, &spec, &d), AS_OK, "%s", d.msg);
    json_decref(spec_dom);

    model_pod_fields f;
    model_span keys[64], values[64];
    model_pod *fast = NULL, *dom = NULL;
    as_err fe = extargs_pod_fields(&a, &f, keys, values, 64)
                    ? model_pod_from_fields(reg, &f, spec, &fast)
                    : AS_EUNSUPPORTED;
    as_err de = extargs_parse_pod(&a, model_skip_pod(), &d);
    if (!de)
        de = model_pod_from_json_spec(reg, a.pod, spec, &dom, &d);
    cr_assert(fe == AS_OK || fe == AS_EUNSUPPORTED, "%s: fields path %d", pod, fe);
    if (fe == AS_OK) {
        cr_assert_eq(de, AS_OK, "%s: the DOM path refused what the fields path took: %s", pod,
                     d.msg);
        same_pods(fast, dom, pod);
    }
    if (plain)
        cr_assert_eq(fe, AS_OK, "%s: the plain case should not need the DOM", pod);
    model_pod_free(fast);
    model_pod_free(dom);
    model_pod_spec_unref(spec);
    extargs_args_release(&a);
    pool_free(p);
    free(body);
    return de == AS_OK;
}

Test(extargs, pod_fields_build_what_the_dom_builds)
{
    model_registry reg;
    model_registry_init(&reg);
    static const char *const spec =
        "\"spec\":{\"schedulerName\":\"agent-scheduler\",\"priority\":5,\"containers\":[{"
        "\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"500m\",\"memory\":\"1Gi\"}}}]}";
    struct {
        const char *rest; /* the Pod's members besides spec */
        bool plain;       /* the fields path takes it */
        bool ok;          /* the DOM path takes it */
    } cases[] = {
        {"\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"uid\":\"u\",\"resourceVersion\":"
         "\"7\",\"labels\":{\"b\":\"2\",\"a\":\"1\"},\"creationTimestamp\":"
         "\"2026-01-02T15:04:05Z\",\"ownerReferences\":[{\"kind\":\"ReplicaSet\"}]},"
         "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"PodScheduled\"}]}",
         true, true},
        {"\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"a\"}", true, true},
        {"\"kind\":null,\"metadata\":{\"name\":\"a\",\"namespace\":null,\"labels\":null},"
         "\"status\":null",
         true, true},
        {" \"metadata\" : { \"name\" : \"a\" , \"labels\" : { } } , \"status\" : { } ", true, true},
        {"\"metadata\":{\"name\":\"a\",\"deletionTimestamp\":\"2026-01-02T15:04:05Z\"}", true,
         true},
        {"\"metadata\":{\"name\":\"a\",\"deletionTimestamp\":null,\"creationTimestamp\":null}",
         true, true},
        {"\"metadata\":{\"name\":\"a\"},\"metadata\":{\"name\":\"b\"}", true, true},
        {"\"metadata\":{\"name\":\"a\",\"labels\":{\"x\":\"1\"},\"labels\":{\"y\":\"2\"}}", true,
         true},
        {"\"status\":{\"phase\":\"Failed\"},\"metadata\":{\"name\":\"a\"},\"status\":{}", true,
         true},
        {"\"metadata\":{\"name\":\"a\",\"annotations\":{\"n\":1.5e300,\"m\":-12}}", true, true},
        /* the DOM decides: what the fields path does not take */
        {"\"metadata\":{\"name\":\"a\",\"labels\":{\"k\":\"1\",\"k\":\"2\"}}", false, true},
        {"\"metadata\":{\"name\":\"a\\u0062\"}", false, true},
        {"\"metadata\":{\"n\\u0061me\":\"a\"}", false, true},
        {"\"metadat\\u0061\":{\"name\":\"a\"},\"metadata\":{\"name\":\"b\"}", false, true},
        {"\"metadata\":{\"name\":\"a\",\"labels\":{\"k\\u0031\":\"1\"}}", false, true},
        {"\"metadata\":{\"name\":\"a\",\"labels\":{\"k\":\"\\u00e9\"}}", false, true},
        {"\"kind\":\"Pod\\u0020\",\"metadata\":{\"name\":\"a\"}", false, false},
        /* refused: by the DOM, and not taken by the fields path */
        {"\"kind\":\"Node\",\"metadata\":{\"name\":\"a\"}", false, false},
        {"\"kind\":7,\"metadata\":{\"name\":\"a\"}", false, false},
        {"\"status\":{\"phase\":\"Running\"}", false, false},
        {"\"metadata\":null", false, false},
        {"\"metadata\":{\"name\":\"a\"},\"metadata\":null", false, false},
        {"\"metadata\":[]", false, false},
        {"\"metadata\":{\"name\":\"\"}", false, false},
        {"\"metadata\":{\"name\":5}", false, false},
        {"\"metadata\":{\"name\":\"a\\u0000b\"}", false, false},
        {"\"metadata\":{\"name\":\"a\",\"namespace\":\"a-namespace-that-is-longer-than-sixty-"
         "three-bytes-which-no-namespace-may-be\"}",
         false, false},
        {"\"metadata\":{\"name\":\"a\",\"uid\":true}", false, false},
        {"\"metadata\":{\"name\":\"a\",\"labels\":{\"k\":1}}", false, false},
        {"\"metadata\":{\"name\":\"a\",\"labels\":{\"k\":null}}", false, false},
        {"\"metadata\":{\"name\":\"a\",\"labels\":[]}", false, false},
        {"\"metadata\":{\"name\":\"a\",\"deletionTimestamp\":1}", false, false},
        {"\"metadata\":{\"name\":\"a\",\"creationTimestamp\":\"yesterday\"}", false, false},
        {"\"metadata\":{\"name\":\"a\",\"creationTimestamp\":5}", false, false},
        {"\"metadata\":{\"name\":\"a\",\"annotations\":{\"n\":1e999}}", false, false},
        {"\"metadata\":{\"name\":\"a\",\"annotations\":{\"n\":99999999999999999999}}", false,
         false},
        {"\"metadata\":{\"name\":\"a\"},\"status\":{\"phase\":\"Sleeping\"}", false, false},
        {"\"metadata\":{\"name\":\"a\"},\"status\":{\"phase\":1}", false, false},
        {"\"metadata\":{\"name\":\"a\"},\"status\":\"Running\"", false, false},
        /* keys the DOM builder refuses, where it builds (found by fuzz_extargs) */
        {"\"metadata\":{\"name\":\"a\"},\"containers\":[{\"c\\u0000x\":1}]", false, false},
        {"\"metadata\":{\"name\":\"a\",\"generateName\":{\"k\\u0000\":1}}", false, false},
        /* and where it drops the member (annotations): taken by the DOM,
         * left to it by the fields path all the same */
        {"\"metadata\":{\"name\":\"a\",\"annotations\":{\"k\\u0000\":\"v\"}}", false, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *pod = NULL;
        cr_assert(asprintf(&pod, "{%s,%s}", cases[i].rest, spec) > 0);
        bool ok = fields_vs_dom(&reg, pod, cases[i].plain);
        cr_assert_eq(ok, cases[i].ok, "case %zu %s: the DOM path %s", i, pod,
                     ok ? "took it" : "refused it");
        free(pod);
    }
    /* long names and many labels: plain up to the limits, the DOM's beyond */
    char name[300], *pod = NULL;
    memset(name, 'n', 253);
    name[253] = '\0';
    cr_assert(asprintf(&pod, "{\"metadata\":{\"name\":\"%s\"},%s}", name, spec) > 0);
    cr_assert(fields_vs_dom(&reg, pod, true));
    free(pod);
    strcat(name, "n");
    cr_assert(asprintf(&pod, "{\"metadata\":{\"name\":\"%s\"},%s}", name, spec) > 0);
    cr_assert(!fields_vs_dom(&reg, pod, false));
    free(pod);
    /* an object key past the builder's 4096 bytes, at the Pod's top level
     * and inside a member the fields path skips */
    char *longkey = malloc(4200);
    memset(longkey, 'k', 4097);
    longkey[4097] = '\0';
    for (int where = 0; where < 2; where++) {
        cr_assert(asprintf(&pod,
                           where ? "{\"metadata\":{\"name\":\"a\"},\"extra\":{\"%s\":1},%s}"
                                 : "{\"metadata\":{\"name\":\"a\"},\"%s\":1,%s}",
                           longkey, spec) > 0);
        cr_assert(!fields_vs_dom(&reg, pod, false), "where %d", where);
        free(pod);
    }
    free(longkey);
    for (int n = 64; n <= 65; n++) {
        char labels[4096] = "";
        size_t o = 0;
        for (int i = 0; i < n; i++)
            o +=
                (size_t)snprintf(labels + o, sizeof labels - o, "%s\"l%d\":\"v\"", i ? "," : "", i);
        cr_assert(
            asprintf(&pod, "{\"metadata\":{\"name\":\"a\",\"labels\":{%s}},%s}", labels, spec) > 0);
        cr_assert(fields_vs_dom(&reg, pod, n == 64));
        free(pod);
    }
    model_registry_destroy(&reg);
}

/* The Pod skip rules of the watch decoder (what the extender's spec memo
 * uses) on the specs of the walk's test Pods and on a kube-scheduler-sized
 * one: every projection builds what the rules build. */
Test(extargs, projection_with_the_pod_rules)
{
    const json_skip *rules = model_skip_pod();
    static const char *const specs[] = {
        "{\"schedulerName\":\"agent-scheduler\",\"priority\":5,\"containers\":[{\"name\":\"c\","
        "\"image\":\"i\",\"command\":[\"/bin/a\"],\"args\":[\"--x\"],\"env\":[{\"name\":\"S\","
        "\"value\":\"s-123\"},{\"name\":\"P\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":"
        "\"status.podIP\"}}}],\"resources\":{\"requests\":{\"cpu\":\"500m\",\"memory\":\"1Gi\"},"
        "\"limits\":{\"memory\":\"2Gi\"}},\"volumeMounts\":[{\"name\":\"w\",\"mountPath\":\"/w\"}],"
        "\"livenessProbe\":{\"httpGet\":{\"path\":\"/healthz\",\"port\":8080}},\"ports\":[{"
        "\"containerPort\":8080}]}],\"initContainers\":[{\"name\":\"i\",\"env\":[],\"resources\":{"
        "\"requests\":{\"cpu\":\"1\"}}}],\"volumes\":[{\"name\":\"w\",\"emptyDir\":{}}],"
        "\"tolerations\":[{\"key\":\"k\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}],"
        "\"nodeSelector\":{\"pool\":\"agents\"},\"securityContext\":{\"fsGroup\":2000},"
        "\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"
        "\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"z\",\"operator\":\"In\","
        "\"values\":[\"a\"]}]}]}}}}",
        "{}",
        "{\"containers\":[]}",
        "{\"overhead\":{\"cpu\":\"100m\"},\"runtimeClassName\":\"gvisor\",\"hostNetwork\":true}",
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
        cr_assert(project(specs[i], rules, "spec", NULL), "spec %zu", i);
    /* two agents of one template, each with its own session in env, args
     * and volume names: one projection */
    char a[1024], b[1024], pa[1024], pb[1024];
    size_t na = 0, nb = 0;
    static const char *const fmt =
        "{\"containers\":[{\"name\":\"agent\",\"args\":[\"--session=%s\"],\"env\":[{\"name\":"
        "\"SESSION\",\"value\":\"%s\"}],\"resources\":{\"requests\":{\"cpu\":\"500m\"}}}],"
        "\"volumes\":[{\"name\":\"work-%s\",\"emptyDir\":{}}]}";
    snprintf(a, sizeof a, fmt, "s-1", "s-1", "s-1");
    snprintf(b, sizeof b, fmt, "s-2222", "s-2222", "s-2222");
    cr_assert(json_project(a, strlen(a), rules, "spec", pa, sizeof pa, &na));
    cr_assert(json_project(b, strlen(b), rules, "spec", pb, sizeof pb, &nb));
    cr_assert(na == nb && memcmp(pa, pb, na) == 0, "%.*s vs %.*s", (int)na, pa, (int)nb, pb);
    /* and a different request: another projection */
    snprintf(b, sizeof b,
             "{\"containers\":[{\"name\":\"agent\",\"resources\":{\"requests\":{\"cpu\":"
             "\"501m\"}}}]}");
    cr_assert(json_project(b, strlen(b), rules, "spec", pb, sizeof pb, &nb));
    cr_assert(na != nb || memcmp(pa, pb, na) != 0);
}

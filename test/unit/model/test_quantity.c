/* test_quantity.c - Kubernetes quantity parsing, table driven. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "agentsched/model/quantity.h"

typedef struct qcase {
    const char *in;
    bool milli;
    as_err err;
    int64_t want;
} qcase;

#define CPU true
#define MEM false

/* Expected values follow resource.Quantity.Value() / MilliValue(): exact
 * decimal arithmetic, fractions rounded up away from zero. */
static const qcase cases[] = {
    /* cpu, millicores */
    {"1", CPU, AS_OK, 1000},
    {"100m", CPU, AS_OK, 100},
    {"250m", CPU, AS_OK, 250},
    {"0.5", CPU, AS_OK, 500},
    {"1.5", CPU, AS_OK, 1500},
    {".5", CPU, AS_OK, 500},
    {"5.", CPU, AS_OK, 5000},
    {"0.0001", CPU, AS_OK, 1},
    {"0.0015", CPU, AS_OK, 2},
    {"0.1m", CPU, AS_OK, 1},
    {"1e-3", CPU, AS_OK, 1},
    {"1e3", CPU, AS_OK, 1000000},
    {"1E3", CPU, AS_OK, 1000000},
    {"2k", CPU, AS_OK, 2000000},
    {"1n", CPU, AS_OK, 1},
    {"1u", CPU, AS_OK, 1},
    {"1000000n", CPU, AS_OK, 1},
    {"1500000n", CPU, AS_OK, 2},
    {"+1", CPU, AS_OK, 1000},
    {"-1", CPU, AS_OK, -1000},
    {"-0.0001", CPU, AS_OK, -1},
    {"0", CPU, AS_OK, 0},
    {"000", CPU, AS_OK, 0},
    {"0.000", CPU, AS_OK, 0},
    {"-0", CPU, AS_OK, 0},
    {"1e-100", CPU, AS_OK, 1},
    {"0e99999999999999", CPU, AS_OK, 0},
    {"9223372036854775807m", CPU, AS_OK, INT64_MAX},
    {"9223372036854775808m", CPU, AS_ERANGE, 0},
    {"9E", CPU, AS_ERANGE, 0},
    {"1Ei", CPU, AS_ERANGE, 0},
    {"1e400", CPU, AS_ERANGE, 0},
    {"1e9223372036854775807", CPU, AS_ERANGE, 0},
    {"1e-9223372036854775807", MEM, AS_OK, 1},
    {"1e9223372036854775808", CPU, AS_EPARSE, 0}, /* exponent beyond int64: syntax */
    {"0e9223372036854775808", CPU, AS_EPARSE, 0},
    {"64", CPU, AS_OK, 64000},
    /* memory and counts, base units */
    {"100m", MEM, AS_OK, 1},
    {"1Ki", MEM, AS_OK, 1024},
    {"1.5Gi", MEM, AS_OK, 1610612736},
    {"128Mi", MEM, AS_OK, 134217728},
    {"0.5Ki", MEM, AS_OK, 512},
    {"0.1Ki", MEM, AS_OK, 103},
    {"1Ti", MEM, AS_OK, 1099511627776},
    {"1Pi", MEM, AS_OK, 1125899906842624},
    {"1Ei", MEM, AS_OK, 1152921504606846976},
    {"7Ei", MEM, AS_OK, 8070450532247928832},
    {"8Ei", MEM, AS_ERANGE, 0},
    {"9E", MEM, AS_OK, 9000000000000000000},
    {"10E", MEM, AS_ERANGE, 0},
    {"1k", MEM, AS_OK, 1000},
    {"1M", MEM, AS_OK, 1000000},
    {"1G", MEM, AS_OK, 1000000000},
    {"1T", MEM, AS_OK, 1000000000000},
    {"1P", MEM, AS_OK, 1000000000000000},
    {"1e3", MEM, AS_OK, 1000},
    {"1E-3", MEM, AS_OK, 1},
    {"12e+2", MEM, AS_OK, 1200},
    {"1.5", MEM, AS_OK, 2},
    {"-1Gi", MEM, AS_OK, -1073741824},
    {"9223372036854775807", MEM, AS_OK, INT64_MAX},
    {"9223372036854775808", MEM, AS_ERANGE, 0},
    {"99999999999999999999999", MEM, AS_ERANGE, 0},
    {"00000000000000000000000001", MEM, AS_OK, 1},
    {"1.00000000000000000000000001", MEM, AS_OK, 2},
    {"8", MEM, AS_OK, 8},
    /* malformed */
    {"", MEM, AS_EPARSE, 0},
    {"abc", MEM, AS_EPARSE, 0},
    {"1x", MEM, AS_EPARSE, 0},
    {"1KI", MEM, AS_EPARSE, 0},
    {"1ki", MEM, AS_EPARSE, 0},
    {"1kb", MEM, AS_EPARSE, 0},
    {"1Gii", MEM, AS_EPARSE, 0},
    {"1.2.3", MEM, AS_EPARSE, 0},
    {"1 Gi", MEM, AS_EPARSE, 0},
    {" 1", MEM, AS_EPARSE, 0},
    {"1e", MEM, AS_EPARSE, 0},
    {"1e+", MEM, AS_EPARSE, 0},
    {"1E3.5", MEM, AS_EPARSE, 0},
    {"1m1", MEM, AS_EPARSE, 0},
    {"+", MEM, AS_EPARSE, 0},
    {"-", MEM, AS_EPARSE, 0},
    {".", MEM, AS_EPARSE, 0},
    {"--1", MEM, AS_EPARSE, 0},
    {"0x10", MEM, AS_EPARSE, 0},
};

Test(quantity, table)
{
    size_t n = sizeof cases / sizeof cases[0];
    cr_assert_geq(n, 40);
    for (size_t i = 0; i < n; i++) {
        const qcase *c = &cases[i];
        int64_t v = 12345;
        as_diag d = {{0}, {0}};
        as_err err = model_quantity_parse(c->in, strlen(c->in), c->milli, &v, &d);
        cr_expect_eq(err, c->err, "\"%s\" (%s): got err %d (%s), want %d", c->in,
                     c->milli ? "cpu" : "mem", err, d.msg, c->err);
        if (err == AS_OK && c->err == AS_OK)
            cr_expect_eq(v, c->want, "\"%s\" (%s): got %lld, want %lld", c->in,
                         c->milli ? "cpu" : "mem", (long long)v, (long long)c->want);
        if (c->err != AS_OK)
            cr_expect_neq(d.msg[0], '\0', "\"%s\": no message", c->in);
    }
}

Test(quantity, parse_uses_length_not_nul)
{
    int64_t v;
    cr_assert_eq(model_quantity_parse("100mXYZ", 4, true, &v, NULL), AS_OK);
    cr_assert_eq(v, 100);
}

Test(quantity, messages_name_text_and_suffixes)
{
    int64_t v;
    as_diag d = {{0}, {0}};
    cr_assert_eq(model_quantity_parse("12x", 3, false, &v, &d), AS_EPARSE);
    cr_expect(strstr(d.msg, "\"12x\"") != NULL, "%s", d.msg);
    cr_expect(strstr(d.msg, "unknown suffix \"x\"") != NULL, "%s", d.msg);
    cr_expect(strstr(d.msg, "Ki Mi Gi Ti Pi Ei") != NULL, "%s", d.msg);
    cr_expect(strstr(d.msg, "m k M G T P E") != NULL, "%s", d.msg);

    cr_assert_eq(model_quantity_parse("9E", 2, true, &v, &d), AS_ERANGE);
    cr_expect(strstr(d.msg, "\"9E\" is too large") != NULL, "%s", d.msg);
    cr_expect(strstr(d.msg, "millicores") != NULL, "%s", d.msg);

    cr_assert_eq(model_quantity_parse("", 0, false, &v, &d), AS_EPARSE);
    cr_expect(strstr(d.msg, "empty") != NULL, "%s", d.msg);
}

Test(quantity, too_long_is_rejected)
{
    char buf[400];
    memset(buf, '1', sizeof buf);
    int64_t v;
    as_diag d = {{0}, {0}};
    cr_assert_eq(model_quantity_parse(buf, sizeof buf, false, &v, &d), AS_EPARSE);
    cr_expect(strstr(d.msg, "longer than") != NULL, "%s", d.msg);
}

typedef struct jcase {
    const char *json;
    bool milli;
    as_err err;
    int64_t want;
} jcase;

Test(quantity, from_json)
{
    static const jcase js[] = {
        {"2", CPU, AS_OK, 2000},
        {"2", MEM, AS_OK, 2},
        {"0.5", CPU, AS_OK, 500},
        {"0.1", CPU, AS_OK, 100}, /* not 101: the shortest text of the double is used */
        {"0.001", CPU, AS_OK, 1},
        {"1e3", MEM, AS_OK, 1000},
        {"1.5e9", MEM, AS_OK, 1500000000},
        {"\" 100m \"", CPU, AS_OK, 100},
        {"\"1.5Gi\"", MEM, AS_OK, 1610612736},
        {"null", CPU, AS_OK, 0},
        {"9223372036854775807", CPU, AS_ERANGE, 0},
        {"9223372036854775807", MEM, AS_OK, INT64_MAX},
        {"1e300", MEM, AS_ERANGE, 0},
        {"{}", MEM, AS_EINVAL, 0},
        {"[]", MEM, AS_EINVAL, 0},
        {"true", MEM, AS_EINVAL, 0},
        {"\"12q\"", MEM, AS_EPARSE, 0},
    };
    for (size_t i = 0; i < sizeof js / sizeof js[0]; i++) {
        json_error_t je;
        json_t *v = json_loads(js[i].json, JSON_DECODE_ANY, &je);
        cr_assert(v, "bad test json %s", js[i].json);
        int64_t out = -7;
        as_diag d = {{0}, {0}};
        as_err err = model_quantity_from_json(v, js[i].milli, &out, &d);
        cr_expect_eq(err, js[i].err, "%s: err %d (%s)", js[i].json, err, d.msg);
        if (!err && !js[i].err)
            cr_expect_eq(out, js[i].want, "%s: got %lld", js[i].json, (long long)out);
        json_decref(v);
    }
}

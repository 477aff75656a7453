/* test_labels.c - label lookup and the Gt/Lt integer parse. */
#include <criterion/criterion.h>
#include <stdint.h>

#include "agentsched/model/labels.h"

Test(labels, get_binary_search)
{
    static const model_kv kv[] = {{"a", "1"}, {"b", "2"}, {"zone", "z1"}};
    model_labels l = {kv, 3};
    cr_assert_str_eq(model_labels_get(&l, "a"), "1");
    cr_assert_str_eq(model_labels_get(&l, "zone"), "z1");
    cr_assert_null(model_labels_get(&l, "c"));
    cr_assert_null(model_labels_get(NULL, "a"));
}

Test(labels, parse_int64)
{
    int64_t v = 0;
    cr_assert(model_labels_parse_int64("42", &v));
    cr_assert_eq(v, 42);
    cr_assert(model_labels_parse_int64("-7", &v));
    cr_assert_eq(v, -7);
    cr_assert(model_labels_parse_int64("+3", &v));
    cr_assert_eq(v, 3);
    cr_assert(model_labels_parse_int64("-9223372036854775808", &v));
    cr_assert_eq(v, INT64_MIN);
    cr_assert(model_labels_parse_int64("9223372036854775807", &v));
    cr_assert_eq(v, INT64_MAX);
    /* Go's ParseInt refuses these too */
    cr_assert_not(model_labels_parse_int64("9223372036854775808", &v));
    cr_assert_not(model_labels_parse_int64("", &v));
    cr_assert_not(model_labels_parse_int64("-", &v));
    cr_assert_not(model_labels_parse_int64("1.5", &v));
    cr_assert_not(model_labels_parse_int64(" 1", &v));
}

Test(labels, toleration_lt_gt)
{
    model_taint taint = {"level", "5", MODEL_EFFECT_NO_SCHEDULE};
    model_toleration lt = {"level", "10", MODEL_TOL_LT, MODEL_EFFECT_ALL};
    model_toleration gt = {"level", "10", MODEL_TOL_GT, MODEL_EFFECT_ALL};
    cr_assert(model_toleration_matches(&lt, &taint));
    cr_assert_not(model_toleration_matches(&gt, &taint));
    model_taint word = {"level", "high", MODEL_EFFECT_NO_SCHEDULE};
    cr_assert_not(model_toleration_matches(&lt, &word), "a non-integer is never tolerated");
}

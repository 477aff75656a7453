/* test_metrics.c - Prometheus text format and series handling. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/metrics.h"

static char *render(metrics *m)
{
    buf b;
    buf_init(&b, 0);
    cr_assert_eq(metrics_render(m, &b), AS_OK);
    char *s = strdup(b.data ? b.data : "");
    buf_free(&b);
    return s;
}

static size_t count_substr(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

Test(metrics, counter_and_gauge_text)
{
    metrics *m = NULL;
    cr_assert_eq(metrics_new(&m), AS_OK);
    metrics_counter *c = metrics_new_counter(m, "agentsched_requests_total", "Requests served.");
    metrics_counter *g = metrics_new_gauge(m, "agentsched_nodes", "Nodes in the cache.");
    cr_assert_not_null(c);
    cr_assert_not_null(g);
    metrics_inc(c);
    metrics_add(c, 41);
    metrics_set(g, -7);
    char *s = render(m);
    cr_assert_str_eq(s, "# HELP agentsched_requests_total Requests served.\n"
                        "# TYPE agentsched_requests_total counter\n"
                        "agentsched_requests_total 42\n"
                        "# HELP agentsched_nodes Nodes in the cache.\n"
                        "# TYPE agentsched_nodes gauge\n"
                        "agentsched_nodes -7\n");
    free(s);
    metrics_free(m);
}

Test(metrics, labelled_series_share_one_header)
{
    metrics *m = NULL;
    cr_assert_eq(metrics_new(&m), AS_OK);
    metrics_counter *fast = metrics_new_counter(m, "binds_total{result=\"fast\"}", "Binds.");
    metrics_new_counter(m, "other_total", "Other.");
    metrics_counter *re = metrics_new_counter(m, "binds_total{result=\"rechecked\"}", "Binds.");
    metrics_add(fast, 3);
    metrics_add(re, 2);
    char *s = render(m);
    cr_assert_eq(count_substr(s, "# HELP binds_total"), 1);
    cr_assert_eq(count_substr(s, "# TYPE binds_total counter"), 1);
    /* both series follow their header, before the next metric family */
    const char *h = strstr(s, "# TYPE binds_total counter\n");
    cr_assert_not_null(h);
    cr_assert(strncmp(h + strlen("# TYPE binds_total counter\n"),
                      "binds_total{result=\"fast\"} 3\nbinds_total{result=\"rechecked\"} 2\n",
                      60) == 0,
              "%s", s);
    free(s);
    metrics_free(m);
}

Test(metrics, counters_of_one_label)
{
    metrics *m = NULL;
    cr_assert_eq(metrics_new(&m), AS_OK);
    static const char *const res[2] = {"hit", "miss"};
    metrics_counter *c[2];
    metrics_new_counters(m, "memo_total", "result", res, 2, "Memo.", c);
    cr_assert(c[0] && c[1] && c[0] != c[1]);
    cr_expect_eq(c[1], metrics_new_counter(m, "memo_total{result=\"miss\"}", "Memo."));
    metrics_add(c[0], 4);
    char *s = render(m);
    cr_expect_eq(count_substr(s, "memo_total{result=\"hit\"} 4\n"), 1, "%s", s);
    cr_expect_eq(count_substr(s, "memo_total{result=\"miss\"} 0\n"), 1, "%s", s);
    free(s);
    /* a name past the cap is refused (NULL), not declared cut short */
    char longv[300];
    memset(longv, 'v', sizeof longv - 1);
    longv[sizeof longv - 1] = '\0';
    const char *const vals[1] = {longv};
    metrics_counter *l[1];
    metrics_new_counters(m, "memo_total", "result", vals, 1, "Memo.", l);
    cr_expect_null(l[0]);
    metrics_free(m);
}

Test(metrics, redeclare_returns_same_handle)
{
    metrics *m = NULL;
    cr_assert_eq(metrics_new(&m), AS_OK);
    metrics_counter *a = metrics_new_counter(m, "x_total", "X.");
    metrics_counter *b = metrics_new_counter(m, "x_total", "X.");
    cr_assert_eq(a, b);
    /* same base name with a different type is refused */
    cr_assert_null(metrics_new_gauge(m, "x_total", "X."));
    cr_assert_null(metrics_new_gauge(m, "x_total{a=\"b\"}", "X."));
    metrics_free(m);
}

Test(metrics, invalid_names_refused_and_null_safe)
{
    metrics *m = NULL;
    cr_assert_eq(metrics_new(&m), AS_OK);
    cr_assert_null(metrics_new_counter(m, "", "h"));
    cr_assert_null(metrics_new_counter(m, "9abc", "h"));
    cr_assert_null(metrics_new_counter(m, "a-b", "h"));
    cr_assert_null(metrics_new_counter(m, "a{", "h"));
    cr_assert_null(metrics_new_counter(m, "a{}", "h"));
    cr_assert_null(metrics_new_counter(m, "a{x=\"y\"", "h"));
    /* updates on NULL handles are no-ops */
    metrics_inc(NULL);
    metrics_set(NULL, 3);
    metrics_observe(NULL, 1.0);
    char *s = render(m);
    cr_assert_str_eq(s, "");
    free(s);
    metrics_free(m);
}

Test(metrics, histogram_buckets_sum_count)
{
    metrics *m = NULL;
    cr_assert_eq(metrics_new(&m), AS_OK);
    const double bounds[] = {0.001, 0.1, 1};
    metrics_histogram *h =
        metrics_new_histogram(m, "lat_seconds{verb=\"filter\"}", "Latency.", bounds, 3);
    cr_assert_not_null(h);
    metrics_observe(h, 0.0005); /* <= 0.001 */
    metrics_observe(h, 0.001);  /* le is inclusive */
    metrics_observe(h, 0.05);
    metrics_observe(h, 5); /* +Inf */
    char *s = render(m);
    cr_assert_str_eq(s, "# HELP lat_seconds Latency.\n"
                        "# TYPE lat_seconds histogram\n"
                        "lat_seconds_bucket{verb=\"filter\",le=\"0.001\"} 2\n"
                        "lat_seconds_bucket{verb=\"filter\",le=\"0.1\"} 3\n"
                        "lat_seconds_bucket{verb=\"filter\",le=\"1\"} 3\n"
                        "lat_seconds_bucket{verb=\"filter\",le=\"+Inf\"} 4\n"
                        "lat_seconds_sum{verb=\"filter\"} 5.0515\n"
                        "lat_seconds_count{verb=\"filter\"} 4\n");
    free(s);
    metrics_free(m);
}

Test(metrics, histogram_without_labels_and_default_buckets)
{
    metrics *m = NULL;
    cr_assert_eq(metrics_new(&m), AS_OK);
    cr_assert_gt(metrics_latency_nbuckets, 10);
    cr_assert_leq(metrics_latency_nbuckets, METRICS_MAX_BUCKETS);
    cr_assert(metrics_latency_buckets[0] <= 0.0001, "sub-millisecond buckets");
    metrics_histogram *h = metrics_new_histogram(m, "d_seconds", "D.", metrics_latency_buckets,
                                                 metrics_latency_nbuckets);
    metrics_observe(h, 0.0002);
    char *s = render(m);
    cr_assert_not_null(strstr(s, "d_seconds_bucket{le=\"5e-05\"} 0\n"), "%s", s);
    cr_assert_not_null(strstr(s, "d_seconds_bucket{le=\"0.00025\"} 1\n"), "%s", s);
    cr_assert_not_null(strstr(s, "d_seconds_bucket{le=\"+Inf\"} 1\n"));
    cr_assert_not_null(strstr(s, "d_seconds_sum 0.0002\n"));
    cr_assert_not_null(strstr(s, "d_seconds_count 1\n"));
    free(s);
    /* bounds must ascend and fit */
    const double bad[] = {1, 0.5};
    cr_assert_null(metrics_new_histogram(m, "bad_seconds", "B.", bad, 2));
    metrics_free(m);
}

Test(metrics, help_is_escaped)
{
    metrics *m = NULL;
    cr_assert_eq(metrics_new(&m), AS_OK);
    metrics_new_gauge(m, "g", "line one\nback\\slash");
    char *s = render(m);
    cr_assert_not_null(strstr(s, "# HELP g line one\\nback\\\\slash\n"), "%s", s);
    free(s);
    metrics_free(m);
}

Test(metrics, label_values_are_escaped)
{
    char out[16];
    cr_assert(metrics_label_value("T4", out, sizeof out));
    cr_assert_str_eq(out, "T4");
    cr_assert(metrics_label_value("a\"b\\c\nd", out, sizeof out));
    cr_assert_str_eq(out, "a\\\"b\\\\c\\nd");
    cr_assert(metrics_label_value("", out, 1));
    cr_assert_str_eq(out, "");
    cr_assert_not(metrics_label_value("", out, 0), "no room for the NUL");
    cr_assert_not(metrics_label_value("abc", out, 3), "no room for the NUL");
    cr_assert_not(metrics_label_value("ab\"", out, 4), "the escape does not fit");
    cr_assert(metrics_label_value("abc", out, 4));
}

Test(metrics, series_count_is_capped)
{
    metrics *m = NULL;
    cr_assert_eq(metrics_new(&m), AS_OK);
    char name[64];
    for (int i = 0; i < METRICS_MAX_SERIES; i++) {
        snprintf(name, sizeof name, "s_total{i=\"%d\"}", i);
        cr_assert_not_null(metrics_new_counter(m, name, "S."));
    }
    cr_assert_null(metrics_new_counter(m, "one_more_total", "S."));
    /* an existing series is still found */
    cr_assert_not_null(metrics_new_counter(m, "s_total{i=\"0\"}", "S."));
    char *s = render(m);
    cr_assert_eq(count_substr(s, "# TYPE"), 1);
    cr_assert_eq(count_substr(s, "s_total{"), METRICS_MAX_SERIES);
    free(s);
    metrics_free(m);
}

Test(metrics, render_respects_buffer_cap)
{
    metrics *m = NULL;
    cr_assert_eq(metrics_new(&m), AS_OK);
    metrics_new_counter(m, "a_long_metric_name_total", "A help text that is long enough.");
    buf b;
    buf_init(&b, 16);
    cr_assert_eq(metrics_render(m, &b), AS_ETOOBIG);
    buf_free(&b);
    metrics_free(m);
}

typedef struct worker_arg {
    metrics_counter *c;
    metrics_histogram *h;
} worker_arg;

static void *worker(void *p)
{
    worker_arg *a = p;
    for (int i = 0; i < 10000; i++) {
        metrics_inc(a->c);
        metrics_observe(a->h, 0.5);
    }
    return NULL;
}

Test(metrics, concurrent_updates_are_not_lost)
{
    metrics *m = NULL;
    cr_assert_eq(metrics_new(&m), AS_OK);
    const double bounds[] = {1};
    worker_arg a = {metrics_new_counter(m, "c_total", "C."),
                    metrics_new_histogram(m, "h_seconds", "H.", bounds, 1)};
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, worker, &a);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    char *s = render(m);
    cr_assert_not_null(strstr(s, "c_total 40000\n"), "%s", s);
    cr_assert_not_null(strstr(s, "h_seconds_sum 20000\n"), "%s", s);
    cr_assert_not_null(strstr(s, "h_seconds_count 40000\n"), "%s", s);
    free(s);
    metrics_free(m);
}

/*
 * metrics.h - lock-free counters, gauges and histograms rendered in the
 * Prometheus text exposition format.
 *
 * Metrics are declared once at start-up (metrics_new_counter / _gauge /
 * metrics_new_histogram return stable handles) and updated from any thread with
 * atomics. A metric name may carry one fixed label set, written in the name:
 * metrics_new_counter(m, "agentsched_binds_total{result=\"fast\"}", help).
 * Series of the same base name share one HELP/TYPE header.
 */
#ifndef AGENTSCHED_METRICS_H
#define AGENTSCHED_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/buf.h"
#include "agentsched/base/error.h"

#define METRICS_MAX_SERIES  256
#define METRICS_MAX_BUCKETS 24

typedef struct metrics metrics;
typedef struct metrics_counter metrics_counter; /* also used for gauges */
typedef struct metrics_histogram metrics_histogram;

/* metrics_new allocates an empty registry (AS_ENOMEM); the caller owns it.
 * metrics_free frees it and every series (NULL ok): handles it returned
 * dangle afterwards, so stop every updater and renderer first. */
as_err metrics_new(metrics **out);
void metrics_free(metrics *m);

/* Declare (or find, when the same name was declared before) a series.
 * NULL (updates on NULL are no-ops) when METRICS_MAX_SERIES is reached, the
 * name is malformed, or it was declared before with another type. */
metrics_counter *metrics_new_counter(metrics *m, const char *name, const char *help);
metrics_counter *metrics_new_gauge(metrics *m, const char *name, const char *help);
/* metrics_label_value copies v into out (cap bytes, NUL-terminated)
 * escaped as a label value of the text format (backslash, double quote and
 * newline), for a series name that carries text the code did not write (a
 * node label, say); false, out unspecified, when it does not fit. */
bool metrics_label_value(const char *v, char *out, size_t cap);
/* metrics_new_counters declares one counter per value of one label,
 * family{label="values[i]"}, into out[0..n), each as metrics_new_counter
 * (NULL where that refuses one, a name too long included). */
void metrics_new_counters(metrics *m, const char *family, const char *label,
                          const char *const *values, size_t n, const char *help,
                          metrics_counter **out);
/* bounds: ascending upper bounds in seconds (+Inf is implicit). */
metrics_histogram *metrics_new_histogram(metrics *m, const char *name, const char *help,
                                         const double *bounds, size_t nbounds);

/* metrics_add adds n to a counter, metrics_inc adds 1, metrics_set stores a
 * gauge's value. Lock-free relaxed atomics, any thread; no-ops on NULL. */
void metrics_add(metrics_counter *c, uint64_t n);
void metrics_inc(metrics_counter *c);
void metrics_set(metrics_counter *g, int64_t v); /* gauges */
/* metrics_counter_get reads a counter's value (0 for NULL). */
uint64_t metrics_counter_get(const metrics_counter *c);
/* metrics_observe counts one sample in the first bucket whose bound is >=
 * seconds (else +Inf) and adds it to the sum. Lock-free, any thread; no-op
 * on NULL h or a NaN sample. */
void metrics_observe(metrics_histogram *h, double seconds);

/* Default latency buckets from 50us to 10s (sub-millisecond included). */
extern const double metrics_latency_buckets[];
extern const size_t metrics_latency_nbuckets;

/* metrics_render appends every series in text format 0.0.4 to out. */
as_err metrics_render(metrics *m, buf *out);

#endif

/* metrics.c - lock-free metrics in the Prometheus text format 0.0.4. */
#include "agentsched/base/metrics.h"

#include <stdio.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define METRICS_NAME_MAX 192
#define METRICS_HELP_MAX 256

typedef enum metrics_type { METRICS_COUNTER = 0, METRICS_GAUGE, METRICS_HISTOGRAM } metrics_type;

struct metrics_counter {
    uint64_t v; /* (atomic) gauges store int64 two's complement */
};

struct metrics_histogram {
    double bounds[METRICS_MAX_BUCKETS];
    size_t nbounds;
    uint64_t counts[METRICS_MAX_BUCKETS + 1]; /* (atomic) per bucket, last = +Inf */
    uint64_t sum_bits;                        /* (atomic) double bits */
};

typedef struct metrics_series {
    char name[METRICS_NAME_MAX]; /* as declared, labels included */
    size_t base_len;             /* length of the base name */
    char help[METRICS_HELP_MAX];
    metrics_type type;
    struct metrics_counter c;
    struct metrics_histogram h;
} metrics_series;

struct metrics {
    pthread_mutex_t mu; /* serialises declarations only */
    size_t n;           /* (atomic) published series; entries [0, n) are immutable but values */
    metrics_series series[METRICS_MAX_SERIES];
};

const double metrics_latency_buckets[] = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                          0.005,   0.01,   0.025,   0.05,   0.1,   0.25,
                                          0.5,     1,      2.5,     5,      10};
const size_t metrics_latency_nbuckets =
    sizeof metrics_latency_buckets / sizeof metrics_latency_buckets[0];

/* See metrics.h. */
as_err metrics_new(metrics **out)
{
    metrics *m = calloc(1, sizeof *m);
    if (!m)
        return AS_ENOMEM;
    pthread_mutex_init(&m->mu, NULL);
    *out = m;
    return AS_OK;
}

/* See metrics.h. */
void metrics_free(metrics *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static bool metrics_name_char(char c, bool first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           (!first && c >= '0' && c <= '9');
}

/* Validates "base" or "base{labels}" and returns the base length, 0 when
 * malformed. Label text is trusted (declared by our own code) but must be
 * braced and non-empty. */
static size_t metrics_base_len(const char *name)
{
    size_t i = 0;
    while (name[i] && name[i] != '{') {
        if (!metrics_name_char(name[i], i == 0))
            return 0;
        i++;
    }
    if (i == 0)
        return 0;
    if (name[i] == '{') {
        size_t n = strlen(name);
        if (n < i + 3 || name[n - 1] != '}')
            return 0;
    }
    return i;
}

static metrics_series *metrics_declare(metrics *m, const char *name, const char *help,
                                       metrics_type type, const double *bounds, size_t nbounds)
{
    if (!m || !name)
        return NULL;
    size_t base = metrics_base_len(name);
    if (base == 0 || strlen(name) >= METRICS_NAME_MAX)
        return NULL;
    if (type == METRICS_HISTOGRAM) {
        if (nbounds > METRICS_MAX_BUCKETS || (nbounds && !bounds))
            return NULL;
        for (size_t i = 1; i < nbounds; i++)
            if (!(bounds[i] > bounds[i - 1]))
                return NULL;
    }
    metrics_series *found = NULL;
    pthread_mutex_lock(&m->mu);
    size_t n = m->n;
    for (size_t i = 0; i < n; i++) {
        metrics_series *s = &m->series[i];
        if (strcmp(s->name, name) == 0) {
            found = s->type == type ? s : NULL;
            goto done;
        }
        /* One base name has one type, or the HELP/TYPE header would lie. */
        if (s->base_len == base && strncmp(s->name, name, base) == 0 && s->type != type)
            goto done;
    }
    if (n >= METRICS_MAX_SERIES)
        goto done;
    found = &m->series[n];
    memset(found, 0, sizeof *found);
    snprintf(found->name, sizeof found->name, "%s", name);
    found->base_len = base;
    snprintf(found->help, sizeof found->help, "%s", help ? help : "");
    found->type = type;
    if (type == METRICS_HISTOGRAM) {
        memcpy(found->h.bounds, bounds, nbounds * sizeof *bounds);
        found->h.nbounds = nbounds;
    }
    /* Publish after the entry is fully written; render reads n with acquire. */
    __atomic_store_n(&m->n, n + 1, __ATOMIC_RELEASE);
done:
    pthread_mutex_unlock(&m->mu);
    return found;
}

/* See metrics.h. */
metrics_counter *metrics_new_counter(metrics *m, const char *name, const char *help)
{
    metrics_series *s = metrics_declare(m, name, help, METRICS_COUNTER, NULL, 0);
    return s ? &s->c : NULL;
}

/* See metrics.h. */
void metrics_new_counters(metrics *m, const char *family, const char *label,
                          const char *const *values, size_t n, const char *help,
                          metrics_counter **out)
{
    for (size_t i = 0; i < n; i++) {
        /* one byte over the cap: a name cut short is refused, not declared */
        char name[METRICS_NAME_MAX + 1];
        snprintf(name, sizeof name, "%s{%s=\"%s\"}", family, label, values[i]);
        out[i] = metrics_new_counter(m, name, help);
    }
}

/* See metrics.h. */
bool metrics_label_value(const char *v, char *out, size_t cap)
{
    if (cap == 0)
        return false;
    size_t o = 0;
    for (; *v; v++) {
        const char *rep = *v == '\\' ? "\\\\" : *v == '"' ? "\\\"" : *v == '\n' ? "\\n" : NULL;
        size_t n = rep ? 2 : 1;
        if (o + n >= cap)
            return false;
        if (rep)
            memcpy(out + o, rep, 2);
        else
            out[o] = *v;
        o += n;
    }
    out[o] = 0;
    return true;
}

/* See metrics.h. */
metrics_counter *metrics_new_gauge(metrics *m, const char *name, const char *help)
{
    metrics_series *s = metrics_declare(m, name, help, METRICS_GAUGE, NULL, 0);
    return s ? &s->c : NULL;
}

/* See metrics.h. */
metrics_histogram *metrics_new_histogram(metrics *m, const char *name, const char *help,
                                         const double *bounds, size_t nbounds)
{
    metrics_series *s = metrics_declare(m, name, help, METRICS_HISTOGRAM, bounds, nbounds);
    return s ? &s->h : NULL;
}

/* See metrics.h. */
void metrics_add(metrics_counter *c, uint64_t n)
{
    if (c)
        __atomic_fetch_add(&c->v, n, __ATOMIC_RELAXED);
}

/* See metrics.h. */
uint64_t metrics_counter_get(const metrics_counter *c)
{
    return c ? __atomic_load_n(&c->v, __ATOMIC_RELAXED) : 0;
}

/* See metrics.h. */
void metrics_inc(metrics_counter *c)
{
    metrics_add(c, 1);
}

/* See metrics.h. */
void metrics_set(metrics_counter *g, int64_t v)
{
    if (g)
        __atomic_store_n(&g->v, (uint64_t)v, __ATOMIC_RELAXED);
}

/* See metrics.h. */
void metrics_observe(metrics_histogram *h, double seconds)
{
    if (!h || isnan(seconds))
        return;
    size_t i = 0;
    while (i < h->nbounds && seconds > h->bounds[i])
        i++;
    __atomic_fetch_add(&h->counts[i], 1, __ATOMIC_RELAXED);
    uint64_t old = __atomic_load_n(&h->sum_bits, __ATOMIC_RELAXED);
    for (;;) {
        double d;
        memcpy(&d, &old, sizeof d);
        d += seconds;
        uint64_t nw;
        memcpy(&nw, &d, sizeof nw);
        if (__atomic_compare_exchange_n(&h->sum_bits, &old, nw, true, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
            break;
    }
}

/* HELP text escaping per format 0.0.4: backslash and newline. */
static void metrics_put_help(buf *out, const char *help)
{
    for (const char *p = help; *p; p++) {
        if (*p == '\\')
            buf_puts(out, "\\\\");
        else if (*p == '\n')
            buf_puts(out, "\\n");
        else
            buf_append(out, p, 1);
    }
}

/* Shortest decimal that reads back as v (0.1 rather than 0.10000000000000001). */
static void metrics_fmt_double(char *s, size_t len, double v)
{
    if (isinf(v)) {
        snprintf(s, len, "%s", v > 0 ? "+Inf" : "-Inf");
        return;
    }
    if (isnan(v)) {
        snprintf(s, len, "NaN");
        return;
    }
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(s, len, "%.*g", prec, v);
        if (strtod(s, NULL) == v)
            return;
    }
}

static void metrics_put_double(buf *out, double v)
{
    char s[64];
    metrics_fmt_double(s, sizeof s, v);
    buf_puts(out, s);
}

/* Writes base + suffix + {labels[,extra]} for series s. */
static void metrics_put_name(buf *out, const metrics_series *s, const char *suffix,
                             const char *extra)
{
    buf_append(out, s->name, s->base_len);
    buf_puts(out, suffix);
    const char *labels = s->name + s->base_len; /* "" or "{...}" */
    size_t llen = strlen(labels);
    if (llen == 0 && !extra)
        return;
    buf_puts(out, "{");
    if (llen)
        buf_append(out, labels + 1, llen - 2);
    if (extra) {
        if (llen)
            buf_puts(out, ",");
        buf_puts(out, extra);
    }
    buf_puts(out, "}");
}

static void metrics_render_series(buf *out, const metrics_series *s)
{
    switch (s->type) {
    case METRICS_COUNTER:
        metrics_put_name(out, s, "", NULL);
        buf_printf(out, " %llu\n", (unsigned long long)__atomic_load_n(&s->c.v, __ATOMIC_RELAXED));
        break;
    case METRICS_GAUGE:
        metrics_put_name(out, s, "", NULL);
        buf_printf(out, " %lld\n", (long long)(int64_t)__atomic_load_n(&s->c.v, __ATOMIC_RELAXED));
        break;
    case METRICS_HISTOGRAM: {
        /* Cumulate once from one read of each bucket so +Inf == _count
         * even while other threads observe. */
        uint64_t cum = 0;
        for (size_t i = 0; i <= s->h.nbounds; i++) {
            cum += __atomic_load_n(&s->h.counts[i], __ATOMIC_RELAXED);
            char num[64], le[80];
            metrics_fmt_double(num, sizeof num, i == s->h.nbounds ? INFINITY : s->h.bounds[i]);
            snprintf(le, sizeof le, "le=\"%s\"", num);
            metrics_put_name(out, s, "_bucket", le);
            buf_printf(out, " %llu\n", (unsigned long long)cum);
        }
        uint64_t bits = __atomic_load_n(&s->h.sum_bits, __ATOMIC_RELAXED);
        double sum;
        memcpy(&sum, &bits, sizeof sum);
        metrics_put_name(out, s, "_sum", NULL);
        buf_puts(out, " ");
        metrics_put_double(out, sum);
        buf_puts(out, "\n");
        metrics_put_name(out, s, "_count", NULL);
        buf_printf(out, " %llu\n", (unsigned long long)cum);
        break;
    }
    }
}

static const char *const metrics_type_names[] = {"counter", "gauge", "histogram"};

/* See metrics.h. */
as_err metrics_render(metrics *m, buf *out)
{
    size_t n = __atomic_load_n(&m->n, __ATOMIC_ACQUIRE);
    for (size_t i = 0; i < n; i++) {
        const metrics_series *s = &m->series[i];
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = m->series[j].base_len == s->base_len &&
                   strncmp(m->series[j].name, s->name, s->base_len) == 0;
        if (seen)
            continue; /* rendered with the first series of its base name */
        buf_puts(out, "# HELP ");
        buf_append(out, s->name, s->base_len);
        buf_puts(out, " ");
        metrics_put_help(out, s->help);
        buf_puts(out, "\n# TYPE ");
        buf_append(out, s->name, s->base_len);
        buf_printf(out, " %s\n", metrics_type_names[s->type]);
        for (size_t j = i; j < n; j++) {
            const metrics_series *t = &m->series[j];
            if (t->base_len == s->base_len && strncmp(t->name, s->name, s->base_len) == 0)
                metrics_render_series(out, t);
        }
    }
    return out->err;
}

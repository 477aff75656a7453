/* gpuannot.c - see gpuannot.h. */
#include "agentsched/model/gpuannot.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* See gpuannot.h. */
as_err gpuannot_contract_parse(const char *name, uint32_t *bit)
{
    if (name && strcmp(name, "agentsched") == 0)
        *bit = GPUANNOT_AGENTSCHED;
    else if (name && strcmp(name, "volcano") == 0)
        *bit = GPUANNOT_VOLCANO;
    else
        return AS_EINVAL;
    return AS_OK;
}

/* See gpuannot.h. */
const char *gpuannot_contract_name(uint32_t bit)
{
    switch (bit) {
    case GPUANNOT_AGENTSCHED:
        return "agentsched";
    case GPUANNOT_VOLCANO:
        return "volcano";
    }
    return "?";
}

/* See gpuannot.h. */
size_t gpuannot_format_devices(uint32_t mask, char *out, size_t cap)
{
    size_t n = 0;
    if (!cap)
        return 0;
    out[0] = '\0';
    for (uint32_t m = mask; m; m &= m - 1) {
        int w = snprintf(out + n, cap - n, "%s%d", n ? "," : "", __builtin_ctz(m));
        if (w < 0 || (size_t)w >= cap - n) {
            out[n] = '\0';
            break;
        }
        n += (size_t)w;
    }
    return n;
}

/* read_uint reads a decimal without sign or leading zero (but "0") at
 * s[*i..len), at most 4 digits; false when there is none. */
static bool read_uint(const char *s, size_t len, size_t *i, uint32_t *v)
{
    size_t start = *i;
    uint32_t x = 0;
    while (*i < len && s[*i] >= '0' && s[*i] <= '9' && *i - start < 5) {
        x = x * 10 + (uint32_t)(s[*i] - '0');
        (*i)++;
    }
    size_t nd = *i - start;
    if (nd == 0 || nd > 4 || (nd > 1 && s[start] == '0'))
        return false;
    *v = x;
    return true;
}

/* See gpuannot.h. */
bool gpuannot_parse_devices(const char *s, size_t len, uint32_t max_devices, uint32_t *mask)
{
    if (!s || !len)
        return false;
    if (max_devices > 32)
        max_devices = 32;
    uint32_t m = 0;
    int64_t last = -1;
    size_t i = 0;
    for (;;) {
        uint32_t d;
        if (!read_uint(s, len, &i, &d) || d >= max_devices || (int64_t)d <= last)
            return false;
        m |= 1u << d;
        last = d;
        if (i == len)
            break;
        if (s[i] != ',')
            return false;
        i++;
    }
    *mask = m;
    return true;
}

/* See gpuannot.h. */
bool gpuannot_parse_milli(const char *s, size_t len, uint32_t *milli)
{
    size_t i = 0;
    uint32_t v;
    if (!s || !read_uint(s, len, &i, &v) || i != len || v < 1 || v > 1000)
        return false;
    *milli = v;
    return true;
}

/* annot appends one "key":"value" member, comma first unless *first. */
static void annot(buf *out, bool *first, const char *key, const char *value)
{
    if (!*first)
        buf_puts(out, ",");
    *first = false;
    buf_json_cstr(out, key);
    buf_puts(out, ":");
    buf_json_cstr(out, value);
}

/* See gpuannot.h. */
as_err gpuannot_patch_body(const gpuannot_patch *p, buf *out)
{
    if (!p->devices || p->milli < 1 || p->milli > 1000 || !p->node || !p->node[0])
        return AS_EINVAL;
    char devs[GPUANNOT_DEVICES_MAX], milli[16], now[32];
    gpuannot_format_devices(p->devices, devs, sizeof devs);
    snprintf(milli, sizeof milli, "%" PRIu32, p->milli);
    snprintf(now, sizeof now, "%" PRId64, p->now_ns);
    buf_puts(out, "{\"metadata\":{");
    bool first = true;
    if (p->uid && p->uid[0])
        annot(out, &first, "uid", p->uid);
    if (p->resource_version && p->resource_version[0])
        annot(out, &first, "resourceVersion", p->resource_version);
    if (!first)
        buf_puts(out, ",");
    buf_puts(out, "\"annotations\":{");
    first = true;
    if (p->contracts & GPUANNOT_AGENTSCHED) {
        annot(out, &first, GPUANNOT_DEVICES, devs);
        annot(out, &first, GPUANNOT_MILLI, milli);
        annot(out, &first, GPUANNOT_NODE, p->node);
    }
    if (p->contracts & GPUANNOT_VOLCANO) {
        annot(out, &first, GPUANNOT_VOLCANO_INDEX, devs);
        annot(out, &first, GPUANNOT_VOLCANO_TIME, now);
    }
    buf_puts(out, "}}}");
    return out->err ? AS_ENOMEM : AS_OK;
}

/*
 * fuzz_wire_body.c - libFuzzer target for the wire's streamed-body
 * decoder (a watch's chunks).
 *
 * Input: byte 0 picks the framing (chunked, sized by byte 1, or to the
 * connection's end) and byte 1 the size of each read; the rest is the
 * body as it comes, given to the decoder a read at a time. Nothing may
 * crash or leak; the decoder never hands on more than it was given, a
 * sized body never more than its size, and it never leaves more than a
 * chunk-size line's worth unread while it asks for more.
 */
#include <stdint.h>
#include <stdlib.h>

#include "agentsched/k8s/wire.h"

static void count(void *arg, const char *data, size_t len)
{
    (void)data;
    if (!len)
        abort();
    *(size_t *)arg += len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int framing = data[0] % 3;
    size_t step = (size_t)data[1] + 1, len = size - 2;
    const uint8_t *p = data + 2;
    k8s_wire_body b;
    k8s_wire_body_start(&b, framing == 0, framing == 1, (uint64_t)data[1] * 3);
    buf in;
    buf_init(&in, (size_t)1 << 20);
    size_t handed = 0, at = 0;
    k8s_wire_parsed r = K8S_WIRE_MORE;
    while (r == K8S_WIRE_MORE && at < len) {
        size_t n = len - at > step ? step : len - at;
        if (buf_append(&in, p + at, n) != AS_OK)
            break;
        at += n;
        r = k8s_wire_body_take(&b, &in, count, &handed);
        if (r == K8S_WIRE_MORE && in.len > 1030)
            abort();
    }
    if (handed > at || (framing == 1 && handed > (size_t)data[1] * 3))
        abort();
    buf_free(&in);
    return 0;
}

/*
 * fuzz_wire.c - libFuzzer target for the wire's HTTP/1.1 answer parser.
 *
 * Input: byte 0 picks a split point; the rest is an answer as read from
 * the connection, given to the parser in two reads, then with the
 * connection ended (an answer still incomplete then is one cut short).
 * Nothing may crash or leak; a whole answer is final (not 1xx) and its
 * body stays within its buffer's cap.
 */
#include <stdint.h>
#include <stdlib.h>

#include "agentsched/k8s/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t len = size - 1, split = (size_t)data[0] * len / 255;
    buf in, resp;
    buf_init(&in, (size_t)1 << 20);
    buf_init(&resp, 512);
    long status = 0;
    bool reusable = false;
    k8s_wire_parsed r = K8S_WIRE_MORE;
    if (buf_append(&in, data + 1, split) == AS_OK)
        r = k8s_wire_parse(&in, false, &resp, &status, &reusable);
    if (r == K8S_WIRE_MORE && buf_append(&in, data + 1 + split, len - split) == AS_OK)
        r = k8s_wire_parse(&in, false, &resp, &status, &reusable);
    if (r == K8S_WIRE_MORE)
        r = k8s_wire_parse(&in, true, &resp, &status, &reusable);
    if (r == K8S_WIRE_DONE && (resp.len > resp.cap || status < 200))
        abort();
    buf_free(&in);
    buf_free(&resp);
    return 0;
}

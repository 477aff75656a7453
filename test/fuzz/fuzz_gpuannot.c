/* fuzz_gpuannot.c - libFuzzer target for the device annotation decoders
 * (gpuannot.h): the device list and the milli, and the round trip of what
 * they accept.
 *
 * Invariants: an accepted list names only devices below the bound, is
 * written back byte for byte by gpuannot_format_devices (the grammar has
 * one spelling per set), and a larger bound accepts it too; an accepted
 * milli is 1..1000 and printed back as the input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/model/gpuannot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    uint32_t max = size ? (uint32_t)(data[0] % 40) : 16;
    uint32_t mask = 0;
    if (gpuannot_parse_devices(s, size, max, &mask)) {
        uint32_t bound = max > 32 ? 32 : max;
        if (!mask || (bound < 32 && (mask >> bound)))
            abort();
        char out[GPUANNOT_DEVICES_MAX];
        size_t n = gpuannot_format_devices(mask, out, sizeof out);
        if (n != size || memcmp(out, s, size) != 0)
            abort();
        uint32_t again = 0;
        if (!gpuannot_parse_devices(s, size, 32, &again) || again != mask)
            abort();
    }
    uint32_t milli = 0;
    if (gpuannot_parse_milli(s, size, &milli)) {
        char out[16];
        int n = snprintf(out, sizeof out, "%u", milli);
        if (milli < 1 || milli > 1000 || (size_t)n != size || memcmp(out, s, size) != 0)
            abort();
    }
    return 0;
}

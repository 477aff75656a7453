/* fuzz_quantity.c - libFuzzer target for model_quantity_parse.
 *
 * Besides "no crash", checks the rounding invariant: with x the exact
 * value, MilliValue = ceil(1000x) and Value = ceil(x) (away from zero), so
 * Value must equal the milli result rounded up to whole units. */
#include <stdint.h>
#include <stdlib.h>

#include "agentsched/model/quantity.h"

static int64_t ceil_div_1000(int64_t m)
{
    int64_t q = m / 1000, r = m % 1000;
    if (r > 0)
        q++;
    else if (r < 0)
        q--;
    return q;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    int64_t base = 0, milli = 0;
    as_diag d;
    as_err eb = model_quantity_parse(s, size, false, &base, &d);
    as_err em = model_quantity_parse(s, size, true, &milli, &d);
    if ((eb == AS_EPARSE) != (em == AS_EPARSE))
        abort(); /* the grammar does not depend on the unit */
    if (eb == AS_OK && em == AS_OK && ceil_div_1000(milli) != base)
        abort();
    if (em == AS_OK && eb != AS_OK)
        abort(); /* a value that fits in millis fits in units */
    return 0;
}

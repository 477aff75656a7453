/*
 * quantity.c - Kubernetes resource quantities.
 *
 * Grammar (k8s.io/apimachinery resource.Quantity):
 *   quantity ::= [+-] number suffix
 *   number   ::= digits | digits "." digits | digits "." | "." digits
 *   suffix   ::= "" | n u m k M G T P E | Ki Mi Gi Ti Pi Ei | (e|E) [+-] digits
 * The value is computed exactly in decimal (no floating point) and rounded
 * up in magnitude to a whole unit (or millicore with milli=true), which is
 * what Quantity.Value()/MilliValue() return: 0.0001 cpu -> 1m, 100m bytes
 * -> 1 byte. Where the API server would silently cap a huge value at
 * 2^63-1, we report AS_ERANGE instead, so a typo never turns into an
 * "infinite" node.
 *
 * Deliberately stricter than upstream's scanner: "+", "-", "." and "" are
 * rejected (the grammar needs a digit; upstream reads "+" as 0).
 */
#include "agentsched/model/quantity.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QTY_MAX_LEN 256
/* Headroom in front of the digits for the carries of x2^60. */
#define QTY_HEAD 24
/* Exponents beyond this are saturated: any non-zero digit shifted this far
 * is either far beyond int64 or far below one unit. */
#define QTY_EXP_SAT 100000

#define QTY_SUFFIX_HELP                                                                            \
    "use a number with an optional suffix: m k M G T P E (decimal), Ki Mi Gi Ti Pi Ei "            \
    "(binary) or an exponent like 1e3, e.g. \"500m\", \"2\", \"1.5Gi\""

static as_err qty_bad(as_diag *diag, const char *s, size_t len, const char *why)
{
    int shown = len > 64 ? 64 : (int)len;
    return as_diag_set(diag, AS_EPARSE, NULL, "invalid quantity \"%.*s%s\": %s; %s", shown, s,
                       len > 64 ? "..." : "", why, QTY_SUFFIX_HELP);
}

/* Decodes the suffix into a power of ten and a power of two. */
static bool qty_suffix(const char *s, size_t len, int64_t *exp10, int *exp2)
{
    *exp10 = 0;
    *exp2 = 0;
    if (len == 0)
        return true;
    if (len == 1) {
        static const char dec[] = "numkMGTPE";
        static const int pow[] = {-9, -6, -3, 3, 6, 9, 12, 15, 18};
        const char *p = memchr(dec, s[0], sizeof dec - 1);
        if (!p)
            return false;
        *exp10 = pow[p - dec];
        return true;
    }
    if (len == 2 && s[1] == 'i') {
        static const char bin[] = "KMGTPE";
        const char *p = memchr(bin, s[0], sizeof bin - 1);
        if (!p)
            return false;
        *exp2 = 10 * (int)(p - bin + 1);
        return true;
    }
    if (s[0] != 'e' && s[0] != 'E')
        return false;
    size_t i = 1;
    bool neg = false;
    if (s[i] == '+' || s[i] == '-') {
        neg = s[i] == '-';
        i++;
    }
    if (i >= len)
        return false;
    /* upstream reads the exponent with ParseInt(.., 64): beyond int64 it is
     * a syntax error, not a huge value */
    uint64_t acc = 0;
    for (; i < len; i++) {
        if (!isdigit((unsigned char)s[i]))
            return false;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (acc > ((uint64_t)INT64_MAX - d) / 10)
            return false;
        acc = acc * 10 + d;
    }
    int64_t e = acc > QTY_EXP_SAT ? QTY_EXP_SAT : (int64_t)acc;
    *exp10 = neg ? -e : e;
    return true;
}

/* See quantity.h. */
as_err model_quantity_parse(const char *s, size_t len, bool milli, int64_t *out, as_diag *diag)
{
    if (len == 0)
        return qty_bad(diag, s, len, "it is empty");
    if (len > QTY_MAX_LEN)
        return qty_bad(diag, s, len, "it is longer than 256 characters");

    size_t i = 0;
    bool neg = false;
    if (s[0] == '+' || s[0] == '-') {
        neg = s[0] == '-';
        i++;
    }
    /* digits[] holds the integer and fraction digits as one integer D with
     * nfrac digits after the point: value = D * 10^-nfrac. */
    char digits[QTY_HEAD + QTY_MAX_LEN];
    size_t nd = QTY_HEAD, nfrac = 0, ndig = 0;
    bool point = false;
    for (; i < len; i++) {
        char ch = s[i];
        if (isdigit((unsigned char)ch)) {
            digits[nd++] = (char)(ch - '0');
            ndig++;
            if (point)
                nfrac++;
        } else if (ch == '.' && !point) {
            point = true;
        } else {
            break;
        }
    }
    if (ndig == 0)
        return qty_bad(diag, s, len, "it must start with a number");
    int64_t exp10;
    int exp2;
    if (!qty_suffix(s + i, len - i, &exp10, &exp2)) {
        char why[96];
        int sl = (int)(len - i) > 24 ? 24 : (int)(len - i);
        snprintf(why, sizeof why, "unknown suffix \"%.*s\"", sl, s + i);
        return qty_bad(diag, s, len, why);
    }

    /* D *= 2^exp2 by repeated doubling; carries grow to the left. */
    size_t start = QTY_HEAD;
    for (int k = 0; k < exp2; k++) {
        int carry = 0;
        for (size_t j = nd; j-- > start;) {
            int d = digits[j] * 2 + carry;
            digits[j] = (char)(d % 10);
            carry = d / 10;
        }
        if (carry)
            digits[--start] = (char)carry;
    }

    /* Position of the decimal point after scaling by 10^(exp10 [+3]),
     * counted in digits from `start`. */
    int64_t ndigits = (int64_t)(nd - start);
    int64_t ip = ndigits - (int64_t)nfrac + exp10 + (milli ? 3 : 0);

    uint64_t mag = 0;
    bool frac_nonzero = false, overflow = false;
    for (int64_t j = 0; j < ndigits; j++) {
        int d = digits[start + (size_t)j];
        if (j < ip) {
            if (mag > (UINT64_MAX - 9) / 10) {
                /* mag is already >= 1.8e18; one more digit is beyond int64 */
                overflow = true;
                break;
            }
            mag = mag * 10 + (uint64_t)d;
        } else if (d) {
            frac_nonzero = true;
        }
    }
    /* Trailing zeros implied by a point beyond the last digit. */
    if (!overflow && mag) {
        for (int64_t j = ndigits; j < ip; j++) {
            if (mag > UINT64_MAX / 10) {
                overflow = true;
                break;
            }
            mag *= 10;
        }
    }
    if (!overflow && frac_nonzero)
        mag++; /* away from zero, like Value()/MilliValue() */
    if (overflow || mag > (uint64_t)INT64_MAX) {
        int shown = len > 64 ? 64 : (int)len;
        return as_diag_set(diag, AS_ERANGE, NULL,
                           "quantity \"%.*s\" is too large: it must fit in a signed 64-bit "
                           "integer of %s (at most 9223372036854775807); use a smaller value",
                           shown, s, milli ? "millicores" : "base units");
    }
    *out = neg ? -(int64_t)mag : (int64_t)mag;
    return AS_OK;
}

/* Shortest decimal text that reads back as exactly d. */
static void qty_real_text(double d, char *buf, size_t n)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, d);
        if (strtod(buf, NULL) == d)
            return;
    }
}

/* See quantity.h. */
as_err model_quantity_from_json(const json_t *v, bool milli, int64_t *out, as_diag *diag)
{
    if (!v || json_is_null(v)) {
        /* Quantity.UnmarshalJSON reads null as zero */
        *out = 0;
        return AS_OK;
    }
    if (json_is_string(v)) {
        /* the API server trims surrounding spaces before parsing */
        const char *s = json_string_value(v);
        size_t len = json_string_length(v);
        while (len && isspace((unsigned char)s[0])) {
            s++;
            len--;
        }
        while (len && isspace((unsigned char)s[len - 1]))
            len--;
        return model_quantity_parse(s, len, milli, out, diag);
    }
    if (json_is_integer(v)) {
        json_int_t x = json_integer_value(v);
        if (!milli) {
            *out = (int64_t)x;
            return AS_OK;
        }
        int64_t r;
        if (__builtin_mul_overflow((int64_t)x, (int64_t)1000, &r))
            return as_diag_set(diag, AS_ERANGE, NULL,
                               "quantity %" PRId64 " is too large: in millicores it must fit in "
                               "a signed 64-bit integer; use a smaller value",
                               (int64_t)x);
        *out = r;
        return AS_OK;
    }
    if (json_is_real(v)) {
        char buf[64];
        qty_real_text(json_real_value(v), buf, sizeof buf);
        return model_quantity_parse(buf, strlen(buf), milli, out, diag);
    }
    return as_diag_set(diag, AS_EINVAL, NULL,
                       "a quantity must be a string like \"500m\" or \"2Gi\" or a number, not %s",
                       json_is_object(v)  ? "an object"
                       : json_is_array(v) ? "an array"
                                          : "a boolean");
}

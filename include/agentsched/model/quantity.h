/*
 * quantity.h - Kubernetes resource quantities ("500m", "2Gi", "1e3").
 */
#ifndef AGENTSCHED_MODEL_QUANTITY_H
#define AGENTSCHED_MODEL_QUANTITY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"

/*
 * model_quantity_parse parses a Kubernetes quantity (s[0..len)): decimal SI
 * suffixes m k M G T P E, binary Ki Mi Gi Ti Pi Ei, exponents 1e3 / 1E-3,
 * fractions 0.5, optional sign. With milli=true the result is in
 * thousandths (cpu millicores), else in base units. Fractions round up in
 * magnitude (away from zero), as the API server's Value()/MilliValue() do
 * ("0.0001" cpu -> 1m, "100m" memory -> 1). Suffixes n and u are accepted
 * too (upstream does); "+", "." and "" are not (the grammar needs a digit).
 * Where the API server would silently cap a value at 2^63-1 this reports
 * AS_ERANGE.
 * Errors: AS_EPARSE (malformed, message in diag), AS_ERANGE (does not fit
 * int64). Negative values parse; callers decide if they are allowed.
 */
as_err model_quantity_parse(const char *s, size_t len, bool milli, int64_t *out, as_diag *diag);

/*
 * model_quantity_from_json accepts a JSON string quantity (surrounding
 * spaces trimmed, as the API server does) or a JSON number (YAML `cpu: 2`
 * arrives as an integer; a real is read through its shortest decimal text,
 * so 0.1 is 100m, not 101m) and parses it as above. JSON null is 0.
 */
as_err model_quantity_from_json(const json_t *v, bool milli, int64_t *out, as_diag *diag);

#endif

/* fuzz_doc.c - libFuzzer target for the YAML/JSON reader (single and
 * multi-document modes); the DOM is serialised to exercise it fully. */
#include <stdint.h>
#include <stdlib.h>

#include "agentsched/base/doc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int multi = 0; multi < 2; multi++) {
        json_t *v = NULL;
        as_diag d;
        as_err err = doc_parse((const char *)data, size, multi, &v, &d);
        if (err == AS_OK) {
            if (!v)
                abort();
            if (multi && !json_is_array(v))
                abort();
            char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
            free(text);
            json_decref(v);
        } else if (v) {
            abort();
        }
    }
    return 0;
}

/*
 * doc.h - read YAML or JSON documents into a jansson DOM.
 *
 * One reader for every configuration-like input (cluster files, policies,
 * sharding configs, kubeconfigs): JSON is parsed with jansson, anything
 * else with libyaml. YAML plain scalars become JSON null/true/false/
 * integers/reals where YAML 1.2 core schema says so; quoted scalars stay
 * strings. Anchors/aliases are rejected (no billion laughs). Multiple YAML
 * documents become a JSON array of documents when `multi` is requested.
 * Sizes and nesting depth are capped.
 */
#ifndef AGENTSCHED_DOC_H
#define AGENTSCHED_DOC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "agentsched/base/error.h"

#define DOC_MAX_DEPTH        64
#define DOC_DEFAULT_FILE_CAP ((size_t)256 << 20) /* 256 MiB */

/*
 * doc_parse parses buf[0..len). With multi=false, more than one YAML
 * document is an error; with multi=true, *out is always a JSON array of the
 * documents (a single JSON document becomes a one-element array).
 * Errors AS_EPARSE with "line L column C: ..." in diag->msg.
 * Caller owns *out (json_decref).
 */
as_err doc_parse(const char *buf, size_t len, bool multi, json_t **out, as_diag *diag);

/*
 * doc_load_file reads at most `cap` bytes (0 = DOC_DEFAULT_FILE_CAP) from
 * path and parses it as doc_parse does. A larger file is AS_ETOOBIG; a
 * missing/unreadable file AS_EIO. diag->msg starts with the path.
 */
as_err doc_load_file(const char *path, size_t cap, bool multi, json_t **out, as_diag *diag);

/*
 * doc_read_file reads a whole file (<= cap bytes, 0 = default) into a
 * malloc'ed NUL-terminated buffer. Caller frees *data.
 */
as_err doc_read_file(const char *path, size_t cap, char **data, size_t *len, as_diag *diag);

#endif

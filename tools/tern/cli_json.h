/* cli_json.h — how the tern CLI writes --json output: every document is built as a cJSON tree
 * and printed by cJSON, so strings (model paths, file names, messages) are always escaped.
 *
 * The helpers exist for two things cJSON does not do on its own:
 *   - integers: cJSON stores every number as a double and prints those past INT_MAX with %g
 *     (1e+15); cli_json_int/uint print the exact decimal digits of a 64-bit integer instead;
 *   - floats: a float widened to double prints as 9.99999997e-07; cli_json_f32 stores the
 *     shortest decimal that reads back as the same float (1e-06), so nothing is lost or invented.
 * Adding to a NULL parent or running out of memory is remembered (not a crash), and
 * cli_json_emit then refuses to print a document with missing fields. */
#ifndef TERN_CLI_JSON_H
#define TERN_CLI_JSON_H

#include <stdbool.h>
#include <stdio.h>

#include <cjson/cJSON.h>

/* Each adds one member to object `parent` under `name`, or appends to array `parent` when name
 * is NULL. Returns the new item (NULL on failure, which cli_json_emit reports). */
cJSON *cli_json_str(cJSON *parent, const char *name, const char *s);
cJSON *cli_json_bool(cJSON *parent, const char *name, bool v);
cJSON *cli_json_int(cJSON *parent, const char *name, long long v);
cJSON *cli_json_uint(cJSON *parent, const char *name, unsigned long long v);
cJSON *cli_json_num(cJSON *parent, const char *name, double v); /* cJSON's %1.15g / %1.17g */
cJSON *cli_json_f32(cJSON *parent, const char *name, float v);  /* shortest round-trip */
cJSON *cli_json_obj(cJSON *parent, const char *name);           /* a new empty object */
cJSON *cli_json_arr(cJSON *parent, const char *name);           /* a new empty array */

/* Print prefix, doc and suffix to f and delete doc. doc is compact, on one line; with
 * `pretty_arrays` cJSON's formatted print is used, which keeps a flat array of numbers on one
 * line as "[1, 2, 3]" (objects would span lines). Returns 0, or CLI_EXIT_FAIL with a message
 * naming cmd, and nothing printed, if any helper failed since the last emit or printing ran out
 * of memory. */
int cli_json_emit(const char *cmd, FILE *f, cJSON *doc, bool pretty_arrays, const char *prefix,
                  const char *suffix);

#endif

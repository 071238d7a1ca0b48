/* cli_json.c — the CLI's JSON output through cJSON (see cli_json.h for why the helpers exist). */
#include "cli_json.h"

#include <math.h>
#include <stdlib.h>

#include "cli.h"

/* Set when a helper could not add its item (out of memory, or a NULL parent after an earlier
 * failure); cli_json_emit checks and clears it. The CLI is single-threaded. */
static bool json_failed;

static cJSON *attach(cJSON *parent, const char *name, cJSON *item)
{
    bool ok = item && parent &&
              (name ? cJSON_AddItemToObject(parent, name, item) : cJSON_AddItemToArray(parent, item));
    if (!ok) {
        cJSON_Delete(item); /* not attached: cJSON leaves it to the caller */
        json_failed = true;
        return NULL;
    }
    return item;
}

cJSON *cli_json_str(cJSON *parent, const char *name, const char *s)
{
    return attach(parent, name, cJSON_CreateString(s ? s : ""));
}

cJSON *cli_json_bool(cJSON *parent, const char *name, bool v)
{
    return attach(parent, name, cJSON_CreateBool(v));
}

cJSON *cli_json_int(cJSON *parent, const char *name, long long v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%lld", v);
    return attach(parent, name, cJSON_CreateRaw(buf));
}

cJSON *cli_json_uint(cJSON *parent, const char *name, unsigned long long v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%llu", v);
    return attach(parent, name, cJSON_CreateRaw(buf));
}

cJSON *cli_json_num(cJSON *parent, const char *name, double v)
{
    return attach(parent, name, cJSON_CreateNumber(v));
}

cJSON *cli_json_f32(cJSON *parent, const char *name, float v)
{
    /* Six significant digits first: %g drops trailing zeros, so when it reads back as v it is
     * also the shortest such form; nine always do for a float. Non-finite values print as
     * null (JSON has no NaN), as cJSON prints them. */
    double d = v;
    if (isfinite(v)) {
        char buf[32];
        for (int prec = 6; prec <= 9; prec++) {
            snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
            if (strtof(buf, NULL) == v) break;
        }
        d = strtod(buf, NULL);
    }
    return attach(parent, name, cJSON_CreateNumber(d));
}

cJSON *cli_json_obj(cJSON *parent, const char *name)
{
    return attach(parent, name, cJSON_CreateObject());
}

cJSON *cli_json_arr(cJSON *parent, const char *name)
{
    return attach(parent, name, cJSON_CreateArray());
}

int cli_json_emit(const char *cmd, FILE *f, cJSON *doc, bool pretty_arrays, const char *prefix,
                  const char *suffix)
{
    char *s = NULL;
    if (doc && !json_failed) s = pretty_arrays ? cJSON_Print(doc) : cJSON_PrintUnformatted(doc);
    cJSON_Delete(doc);
    json_failed = false;
    if (!s) {
        fprintf(stderr, "tern %s: out of memory building the JSON output\n", cmd);
        return CLI_EXIT_FAIL;
    }
    fputs(prefix, f);
    fputs(s, f);
    fputs(suffix, f);
    free(s);
    return CLI_EXIT_OK;
}

/* cmd_bless.c — `tern bless current.json [-o BLESSED.json]`: make a report the baseline the gate
 * compares against. The report is checked first (schema, fingerprints) and refused when its
 * repetitions did not give identical tokens (a baseline must be reproducible); the copy gets a
 * "blessed" record (from which file, when) and is written atomically, by default to
 * baselines/<hardware profile key>.json, where `tern gate CURRENT.json` finds it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "cli_gov.h"

struct bless_opts {
    const char *report, *out;
};

#define B struct bless_opts
static const struct cli_option bless_table[] = {
    {.meta = "REPORT.json", .kind = CLI_PATH, CLI_AT(B, report), .flags = CLI_REQUIRED,
     .help = "the report to bless (tern bench --suite --json)"},
    {"-o", "--output", CLI_PATH, "BLESSED.json", CLI_AT(B, out),
     .def = "baselines/<hardware profile key>.json, '/' in the key written as '_'",
     .help = "where to store the baseline (atomically)"},
    {0},
};
#undef B

const struct cli_command cli_spec_bless = {
    "bless", "REPORT.json [-o BLESSED.json]",
    "Checks the report and stores it as the baseline of `tern gate`; a report whose\n"
    "repetitions did not give identical tokens is refused.\n",
    bless_table, CLI_OPTS(struct bless_opts, NULL), NULL,
};

static cJSON *load(const char *path)
{
    size_t len;
    char *text = cli_read_file(path, &len);
    if (!text) {
        fprintf(stderr, "tern bless: cannot read %s\n", path);
        return NULL;
    }
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    return j;
}

int cli_bless_default_path(const char *report, char *key, size_t key_n, char *path, size_t path_n)
{
    if (tern_bench_report_check_file(report)) {
        fprintf(stderr, "tern: %s\n", tern_last_error());
        return CLI_EXIT_USAGE;
    }
    cJSON *j = load(report);
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(j, "hardware"), "profile"), "key");
    snprintf(key, key_n, "%s", cJSON_GetStringValue(k) ? cJSON_GetStringValue(k) : "unknown");
    cJSON_Delete(j);
    char safe[256];
    snprintf(safe, sizeof safe, "%s", key);
    for (char *c = safe; *c; c++)
        if (*c == '/' || *c == ' ') *c = '_';
    snprintf(path, path_n, "baselines/%s.json", safe);
    return CLI_EXIT_OK;
}

int cmd_bless(int argc, char **argv)
{
    struct bless_opts o = {0};
    const int pr = cli_parse(&cli_spec_bless, argc, argv, &o);
    if (pr != CLI_PARSED) return pr;
    const char *report = o.report, *out = o.out;
    char key[256], path[600];
    if (cli_bless_default_path(report, key, sizeof key, path, sizeof path)) return CLI_EXIT_USAGE;
    if (!out) {
        mkdir("baselines", 0755);
        out = path;
    }
    cJSON *j = load(report);
    if (!j) return CLI_EXIT_FAIL;
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "determinism"), "identical_tokens"))) {
        cJSON_Delete(j);
        fprintf(stderr, "tern bless: %s: its repetitions did not give identical tokens (determinism.identical_tokens "
                "is false): a baseline must be reproducible\n", report);
        return CLI_EXIT_USAGE;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(j, "blessed");
    cJSON *b = cJSON_AddObjectToObject(j, "blessed");
    char when[32];
    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    cJSON_AddStringToObject(b, "from", report);
    cJSON_AddStringToObject(b, "at", when);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    int rc = text ? cli_write_atomic("bless", out, text) : CLI_EXIT_FAIL;
    free(text);
    if (!rc) printf("blessed %s as the baseline of profile %s: %s\n", report, key, out);
    return rc;
}

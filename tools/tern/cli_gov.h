/* cli_gov.h — what `tern bench --suite`, `tern gate` and `tern bless` share: where the hardware
 * profile file is, writing a file atomically, and the suite runner (cmd_bench_suite.c). */
#ifndef TERN_CLI_GOV_H
#define TERN_CLI_GOV_H

#include <stdbool.h>
#include <stddef.h>

/* --profiles FILE if given, else $TERN_PROFILES, else configs/hardware_profiles.yaml in the
 * current directory, else beside the binary's source tree (build/bin/tern -> configs/). NULL
 * (message printed) if none exists. */
const char *cli_profiles_path(const char *cmd, const char *given);
/* Write text (+ a newline) to path.tmp and rename it over path; CLI_EXIT_OK or a message. */
int cli_write_atomic(const char *cmd, const char *path, const char *text);
/* tern eval's schema validator as a callback (tern_bench_call_valid_fn, and
 * tern_train_render_params.call_valid): a suite's TTFA counts, and the early tool-call loss
 * marks, the calls tern eval would score as valid. */
bool cli_eval_call_valid(const char *tools_json, const char *name, const char *args, void *user);
/* `tern bench --suite ...` (argv as cmd_bench got it). */
int cli_bench_suite(int argc, char **argv);

/* baselines/<profile key>.json for a report (checked first; message printed on failure):
 * CLI_EXIT_OK or CLI_EXIT_USAGE. */
int cli_bless_default_path(const char *report, char *key, size_t key_n, char *path, size_t path_n);

#endif

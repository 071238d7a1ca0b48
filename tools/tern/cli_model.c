/* cli_model.c — the model a command runs: the file given with -m, or, without -m, tern's own
 * tool-calling model linked into the binary (models/tern-tool.gguf, embedded by
 * tools/tern/embedded_model.S.in when the build finds the file; models/README.md is its card).
 *
 * The embedded image lives in the program's read-only data, aligned to 64 bytes, and is used
 * in place (tern_model_load_memory), so a default run costs no file and no copy. */

#include <stdio.h>

#include "cli.h"

#ifdef TERN_HAVE_EMBEDDED_MODEL
extern const unsigned char tern_embedded_model[];
extern const unsigned char tern_embedded_model_end[];
#endif

bool cli_have_embedded_model(void)
{
#ifdef TERN_HAVE_EMBEDDED_MODEL
    return true;
#else
    return false;
#endif
}

int cli_need_model(const char *cmd, const char *path)
{
    if (path || cli_have_embedded_model()) return CLI_EXIT_OK;
    return cli_usage_error(cmd, "missing -m MODEL (this build has no embedded model: "
                           "models/tern-tool.gguf was absent when it was built)");
}

tern_status cli_load_model(const char *path, struct tern_model **out)
{
    const struct tern_model_params mp = {.prefault = true};
    if (path) return tern_model_load(path, &mp, out);
#ifdef TERN_HAVE_EMBEDDED_MODEL
    return tern_model_load_memory(tern_embedded_model,
                                  (size_t)(tern_embedded_model_end - tern_embedded_model), &mp, out);
#else
    return TERN_ERR_ARG; /* callers check first (cli_need_model) */
#endif
}

bool cli_embedded_model(const void **data, size_t *size)
{
#ifdef TERN_HAVE_EMBEDDED_MODEL
    *data = tern_embedded_model;
    *size = (size_t)(tern_embedded_model_end - tern_embedded_model);
    return true;
#else
    *data = NULL;
    *size = 0;
    return false;
#endif
}

void cli_note_repack(const char *cmd, const char *model, const struct tern_model_info *in)
{
    if (!in->repacked_bytes) return;
    fprintf(stderr, "tern %s: %s: %.1f MiB of weights repacked at load for the %s kernels, %.1f MiB "
            "of file rows released (--no-repack: mmap-only)\n", cmd, model,
            in->repacked_bytes / 1048576.0, tern_kernels_name(), in->released_bytes / 1048576.0);
    if (in->decode_tiles && *in->decode_tiles)
        fprintf(stderr, "tern %s: tiles of 1 / 2-3 tokens %s\n", cmd, in->decode_tiles);
}

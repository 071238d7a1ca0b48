/* cli_gov.c — helpers of the speed-governance commands (cli_gov.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_gov.h"

const char *cli_profiles_path(const char *cmd, const char *given)
{
    static char buf[PATH_MAX + 64];
    if (given) return given;
    const char *env = getenv("TERN_PROFILES");
    if (env && *env) return env;
    if (access("configs/hardware_profiles.yaml", R_OK) == 0) return "configs/hardware_profiles.yaml";
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        /* build/bin/tern -> build/bin/../../configs */
        snprintf(buf, sizeof buf, "%s/../../configs/hardware_profiles.yaml", exe);
        if (access(buf, R_OK) == 0) return buf;
    }
    fprintf(stderr, "tern %s: no hardware profile file: give --profiles FILE or set TERN_PROFILES "
            "(tern ships configs/hardware_profiles.yaml)\n", cmd);
    return NULL;
}

int cli_write_atomic(const char *cmd, const char *path, const char *text)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp) {
        fprintf(stderr, "tern %s: path too long: %s\n", cmd, path);
        return CLI_EXIT_FAIL;
    }
    FILE *f = fopen(tmp, "w");
    bool ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f) != 0) ok = false;
    if (ok && rename(tmp, path) == 0) return CLI_EXIT_OK;
    fprintf(stderr, "tern %s: cannot write %s: %s\n", cmd, path, strerror(errno));
    remove(tmp);
    return CLI_EXIT_FAIL;
}

/* cli_models.c — the real models installed from packages (scripts/install-models.py, manifest
 * models/packages.json): where they live, what each is, and -m NAME.
 *
 * The install script writes each model as <dir>/<file>.gguf with a card <dir>/<name>.json
 * (name, file, sha256, description, license, packages); this file only reads those cards. The
 * folder is $TERN_MODELS_DIR, else $XDG_DATA_HOME/tern/models, else ~/.local/share/tern/models,
 * the same rule as the script's. Nothing here fetches anything: a name that is not installed is
 * an error that says how to install it. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "tern_gguf.h"

uint64_t cli_gguf_tensor_stats(const struct tern_gguf *g, int64_t *count, uint64_t *bytes)
{
    uint64_t params = 0;
    memset(count, 0, TERN_TYPE_COUNT_ * sizeof *count);
    memset(bytes, 0, TERN_TYPE_COUNT_ * sizeof *bytes);
    for (int64_t i = 0; i < tern_gguf_n_tensors(g); i++) {
        const struct tern_gguf_tensor *t = tern_gguf_tensor(g, i);
        uint64_t ne = 1;
        for (int d = 0; d < t->n_dims; d++) ne *= (uint64_t)t->ne[d];
        params += ne;
        if (t->type < 0 || t->type >= TERN_TYPE_COUNT_) continue;
        count[t->type]++;
        bytes[t->type] += t->nbytes;
    }
    return params;
}

const char *cli_models_dir(void)
{
    static char dir[4096];
    const char *env = getenv("TERN_MODELS_DIR");
    if (env && *env) return env;
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    if (xdg && *xdg)
        snprintf(dir, sizeof dir, "%s/tern/models", xdg);
    else
        snprintf(dir, sizeof dir, "%s/.local/share/tern/models", home && *home ? home : ".");
    return dir;
}

static char *dup_field(const cJSON *card, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(card, key);
    return strdup(cJSON_IsString(v) ? v->valuestring : "");
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct cli_installed *)a)->name, ((const struct cli_installed *)b)->name);
}

int cli_models_list(struct cli_installed **out)
{
    *out = NULL;
    const char *dir = cli_models_dir();
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct cli_installed *list = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const size_t len = strlen(e->d_name);
        if (len < 6 || e->d_name[0] == '.' || strcmp(e->d_name + len - 5, ".json") != 0) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        char *text = cli_read_file(path, NULL);
        cJSON *card = text ? cJSON_Parse(text) : NULL;
        free(text);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(card, "name");
        const cJSON *file = cJSON_GetObjectItemCaseSensitive(card, "file");
        /* a card that is not the install script's (or a file of another tool) is skipped */
        if (!cJSON_IsString(name) || !cJSON_IsString(file) || strchr(file->valuestring, '/')) {
            cJSON_Delete(card);
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            struct cli_installed *grown = realloc(list, (size_t)cap * sizeof *list);
            if (!grown) { cJSON_Delete(card); break; }
            list = grown;
        }
        struct cli_installed *m = &list[n++];
        m->name = strdup(name->valuestring);
        snprintf(path, sizeof path, "%s/%s", dir, file->valuestring);
        m->path = strdup(path);
        m->description = dup_field(card, "description");
        m->license = dup_field(card, "license");
        m->sha256 = dup_field(card, "sha256");
        m->base = dup_field(card, "base");
        const cJSON *pk = cJSON_GetObjectItemCaseSensitive(card, "packages"), *p;
        size_t plen = 1;
        cJSON_ArrayForEach(p, pk) if (cJSON_IsString(p)) plen += strlen(p->valuestring) + 1;
        m->packages = calloc(1, plen);
        cJSON_ArrayForEach(p, pk) {
            if (!cJSON_IsString(p) || !m->packages) continue;
            if (*m->packages) strcat(m->packages, " ");
            strcat(m->packages, p->valuestring);
        }
        cJSON_Delete(card);
    }
    closedir(d);
    if (n) qsort(list, (size_t)n, sizeof *list, by_name);
    *out = list;
    return n;
}

void cli_models_free(struct cli_installed *list, int n)
{
    for (int i = 0; i < n; i++) {
        free(list[i].name), free(list[i].path), free(list[i].description);
        free(list[i].license), free(list[i].sha256), free(list[i].packages), free(list[i].base);
    }
    free(list);
}

/* A value that names a file (it exists, or has a slash or a .gguf suffix) is a path; anything
 * else is looked up as a name. */
static bool looks_like_path(const char *v)
{
    struct stat st;
    const size_t len = strlen(v);
    return stat(v, &st) == 0 || strchr(v, '/') || (len > 5 && !strcmp(v + len - 5, ".gguf"));
}

static int find_installed(const struct cli_installed *list, int n, const char *name)
{
    for (int k = 0; k < n; k++)
        if (!strcmp(list[k].name, name)) return k;
    return -1;
}

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Do commands of this name take --lora? (the others get the base alone) */
static bool takes_lora(const char *cmd)
{
    static const char *const with[] = {"run", "chat", "probe", "bench", "check", "perplexity",
                                       "eval", "serve"};
    for (size_t i = 0; i < sizeof with / sizeof *with; i++)
        if (!strcmp(cmd, with[i])) return true;
    return false;
}

/* out += -m BASE [--lora ADAPTER] for the installed adapter list[k] (its base must be there). */
static int push_adapter(const char *cmd, const struct cli_installed *list, int n, int k,
                        const char *flag, char **out, int *n_out)
{
    const int b = find_installed(list, n, list[k].base);
    if (b < 0 || !file_exists(list[b].path) || !file_exists(list[k].path)) {
        fprintf(stderr, "tern %s: %s is a LoRA adapter on %s, which is not installed (or a file "
                "is missing): python3 scripts/install-models.py\n", cmd, list[k].name, list[k].base);
        return CLI_EXIT_FAIL;
    }
    out[(*n_out)++] = (char *)flag;
    out[(*n_out)++] = strdup(list[b].path);
    if (!takes_lora(cmd)) return CLI_EXIT_OK;
    out[(*n_out)++] = "--lora";
    if (!strcmp(cmd, "serve")) { /* the server's NAME=FILE: requests ask for it by its name */
        char *v = malloc(strlen(list[k].name) + strlen(list[k].path) + 2);
        if (v) sprintf(v, "%s=%s", list[k].name, list[k].path);
        out[(*n_out)++] = v;
    } else {
        out[(*n_out)++] = strdup(list[k].path);
    }
    return CLI_EXIT_OK;
}

int cli_resolve_model_args(int *argc_io, char ***argv_io)
{
    const int argc = *argc_io;
    char **argv = *argv_io;
    struct cli_installed *list = NULL;
    int n = -1;
    /* room for every argument, plus -m BASE --lora ADAPTER (serve: and --default-model NAME)
     * once, and the NULL; lives for the process */
    char **out = calloc((size_t)argc + 7, sizeof *out);
    if (!out) return CLI_EXIT_FAIL;
    int n_out = 0, rc = CLI_EXIT_OK;
    bool model_given = false, embedded = false;
    out[n_out++] = argv[0];
    for (int i = 1; i < argc && !rc; i++) {
        const bool model_flag = !strcmp(argv[i], "-m") || !strcmp(argv[i], "--model");
        const bool path_flag = model_flag || !strcmp(argv[i], "--lora-base");
        const bool draft_flag = !strcmp(argv[i], "--draft") || !strcmp(argv[i], "--teacher");
        model_given |= model_flag; /* also a -m without its value: the command says so */
        if ((!path_flag && !draft_flag) || i + 1 >= argc) {
            out[n_out++] = argv[i];
            continue;
        }
        const char *v = argv[i + 1];
        model_given |= model_flag;
        if (model_flag && !strcmp(v, CLI_EMBEDDED_NAME) && !looks_like_path(v)) {
            embedded = true; /* -m tern-tool: the embedded model, as no -m is without adapters */
            i++;
            continue;
        }
        out[n_out++] = argv[i];
        if (!*v || looks_like_path(v)) {
            out[n_out++] = argv[++i];
            continue;
        }
        if (n < 0) n = cli_models_list(&list);
        const int found = find_installed(list, n, v);
        i++;
        if (found >= 0 && list[found].base[0] && model_flag) {
            n_out--; /* the flag goes back in with the base */
            rc = push_adapter(argv[0], list, n, found, argv[i - 1], out, &n_out);
            continue;
        }
        if (found >= 0 && !list[found].base[0]) {
            out[n_out++] = strdup(list[found].path);
            continue;
        }
        if (draft_flag) { /* --draft also takes words of its own (mtp, ngram) */
            out[n_out++] = argv[i];
            continue;
        }
        fprintf(stderr, "tern %s: %s %s: no such file, and no installed model of that name in %s "
                "(installed: ", argv[0], argv[i - 1], v, cli_models_dir());
        for (int k = 0; k < n; k++) fprintf(stderr, "%s%s", k ? ", " : "", list[k].name);
        fprintf(stderr, "%s)\n  install the real models with: python3 scripts/install-models.py "
                "(tern models lists what is installed)\n", n > 0 ? "" : "none");
        rc = CLI_EXIT_FAIL;
    }
    /* run, chat and serve without -m: tern's tool caller on its installed base when it is
     * there (serve: requests that name no other model run it, --default-model) */
    const bool serve = !strcmp(argv[0], "serve");
    if (!rc && !model_given && !embedded &&
        (!strcmp(argv[0], "run") || !strcmp(argv[0], "chat") || serve)) {
        if (n < 0) n = cli_models_list(&list);
        const int k = find_installed(list, n, CLI_DEFAULT_ADAPTER);
        const int b = k >= 0 ? find_installed(list, n, list[k].base) : -1;
        if (k >= 0 && b >= 0 && file_exists(list[k].path) && file_exists(list[b].path)) {
            rc = push_adapter(argv[0], list, n, k, "-m", out, &n_out);
            if (!rc && serve) {
                out[n_out++] = "--default-model";
                out[n_out++] = CLI_DEFAULT_ADAPTER;
            }
        }
    }
    if (n > 0) cli_models_free(list, n);
    out[n_out] = NULL;
    *argc_io = n_out;
    *argv_io = out;
    return rc;
}

/* cmd_models.c — `tern models`: the real pretrained models installed from packages (the cards
 * that scripts/install-models.py writes, cli_models.c), each with what its GGUF says: name,
 * architecture, parameters, tensor types, size; plus license and source packages from its card.
 * With --verify the file's SHA-256 is checked against the card. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tern_gguf.h"
#include "cli_json.h"

struct models_opts {
    bool json, verify;
};

static const struct cli_option models_table[] = {
    {NULL, "--json", CLI_FLAG, NULL, CLI_AT(struct models_opts, json),
     .help = "one JSON array of objects (name, path, arch, model_name, params, tensor_types, bytes, "
             "license, packages, description, sha256)"},
    {NULL, "--verify", CLI_FLAG, NULL, CLI_AT(struct models_opts, verify),
     .help = "read each file and check its SHA-256 against the card (exit 1 on a mismatch)"},
    {0},
};

const struct cli_command cli_spec_models = {
    "models", "[--json] [--verify]",
    "Lists the real models installed by scripts/install-models.py (from the pinned Python\n"
    "packages of models/packages.json) in $TERN_MODELS_DIR, else $XDG_DATA_HOME/tern/models,\n"
    "else ~/.local/share/tern/models: name, file, architecture, parameters, tensor types,\n"
    "size, license and source packages. Any command takes a listed name for -m:\n"
    "  tern run -m smollm2-135m-instruct -p \"The capital of France is\"\n",
    models_table, CLI_OPTS(struct models_opts, NULL), NULL,
};

struct gguf_facts {
    char arch[64], model_name[128];
    uint64_t params, bytes;
    int64_t count[TERN_TYPE_COUNT_];
};

static tern_status read_facts(const char *path, struct gguf_facts *f)
{
    memset(f, 0, sizeof *f);
    struct tern_gguf *g;
    tern_status st = tern_gguf_open(path, &g);
    if (st) return st;
    struct tern_str s;
    if (tern_gguf_get_str(g, "general.architecture", &s) == TERN_OK)
        snprintf(f->arch, sizeof f->arch, "%.*s", (int)s.len, s.ptr);
    if (tern_gguf_get_str(g, "general.name", &s) == TERN_OK)
        snprintf(f->model_name, sizeof f->model_name, "%.*s", (int)s.len, s.ptr);
    uint64_t bytes[TERN_TYPE_COUNT_];
    f->params = cli_gguf_tensor_stats(g, f->count, bytes);
    f->bytes = tern_gguf_file_size(g);
    tern_gguf_close(g);
    return TERN_OK;
}

/* "Q4_1 x 169, F32 x 61": the types by tensor count, most first */
static void types_text(const struct gguf_facts *f, char *out, size_t cap)
{
    int64_t left[TERN_TYPE_COUNT_];
    memcpy(left, f->count, sizeof left);
    size_t len = 0;
    out[0] = 0;
    for (;;) {
        int best = -1;
        for (int t = 0; t < TERN_TYPE_COUNT_; t++)
            if (left[t] && (best < 0 || left[t] > left[best])) best = t;
        if (best < 0 || len >= cap) break;
        len += (size_t)snprintf(out + len, cap - len, "%s%s x %lld", len ? ", " : "",
                                tern_type_name(best), (long long)left[best]);
        left[best] = 0;
    }
}

int cmd_models(int argc, char **argv)
{
    struct models_opts o = {0};
    const int pr = cli_parse(&cli_spec_models, argc, argv, &o);
    if (pr != CLI_PARSED) return pr;
    const bool json = o.json, verify = o.verify;
    struct cli_installed *list;
    const int n = cli_models_list(&list);
    int rc = CLI_EXIT_OK;
    cJSON *arr = json ? cJSON_CreateArray() : NULL;
    if (!json && n == 0)
        printf("no real models installed in %s\n  install them with: python3 scripts/install-models.py\n",
               cli_models_dir());
    for (int k = 0; k < n; k++) {
        const struct cli_installed *m = &list[k];
        struct gguf_facts f;
        tern_status st = read_facts(m->path, &f);
        const char *problem = st ? tern_last_error() : NULL;
        char hex[65] = "";
        if (!st && verify) {
            if (tern_sha256_file(m->path, hex)) problem = tern_last_error();
            else if (strcmp(hex, m->sha256) != 0) problem = "SHA-256 differs from the card's: reinstall it";
        }
        if (problem) rc = CLI_EXIT_FAIL;
        char types[512];
        types_text(&f, types, sizeof types);
        if (json) {
            cJSON *o = cli_json_obj(arr, NULL);
            cli_json_str(o, "name", m->name);
            cli_json_str(o, "path", m->path);
            if (problem) cli_json_str(o, "error", problem);
            cli_json_str(o, "arch", f.arch);
            cli_json_str(o, "model_name", f.model_name);
            cli_json_uint(o, "params", f.params);
            cJSON *tt = cli_json_obj(o, "tensor_types");
            for (int t = 0; t < TERN_TYPE_COUNT_; t++)
                if (f.count[t]) cli_json_int(tt, tern_type_name(t), f.count[t]);
            cli_json_uint(o, "bytes", f.bytes);
            cli_json_str(o, "license", m->license);
            cli_json_str(o, "packages", m->packages);
            cli_json_str(o, "description", m->description);
            cli_json_str(o, "sha256", m->sha256);
            if (m->base[0]) cli_json_str(o, "adapter_of", m->base);
            if (verify && !problem) cli_json_bool(o, "verified", true);
        } else {
            printf("%s\n  file:     %s\n", m->name, m->path);
            if (problem) {
                printf("  ERROR:    %s\n", problem);
                continue;
            }
            printf("  model:    %s (%s)\n  arch:     %s, %.1f M parameters\n  types:    %s\n"
                   "  size:     %.1f MiB\n  license:  %s\n  source:   %s\n",
                   f.model_name, m->description, f.arch, f.params / 1e6, types,
                   f.bytes / 1048576.0, m->license, m->packages);
            if (m->base[0])
                printf("  adapter:  a LoRA adapter on %s (-m %s runs it on its base)\n", m->base,
                       m->name);
            if (verify) printf("  sha256:   %s (matches the card)\n", hex);
        }
    }
    cli_models_free(list, n);
    if (json) {
        int e = cli_json_emit("models", stdout, arr, false, "", "\n");
        if (e) rc = e;
    }
    return rc;
}

/* cli.c — helpers shared by the subcommands (see cli.h): status reports, token lists,
 * files, the generating commands' common flags, SIGPIPE, the training-context warning. */
#include "cli.h"
#include "tern_gguf.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_report(const char *cmd, tern_status st)
{
    fprintf(stderr, "tern %s: %s: %s\n", cmd, tern_status_name(st), tern_last_error());
    return CLI_EXIT_FAIL;
}

bool cli_parse_token_list(const char *s, int32_t **ids, int *n, int *bad_index)
{
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += (*p == ',');
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) return false;
    int count = 0;
    const char *p = s;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char buf[32];
        long long x;
        if (len == 0 || len >= sizeof buf) goto bad;
        memcpy(buf, p, len);
        buf[len] = '\0';
        if (!cli_parse_int(buf, 0, INT32_MAX, &x)) goto bad;
        v[count++] = (int32_t)x;
        if (!comma) break;
        p = comma + 1;
    }
    *ids = v;
    *n = count;
    return true;
bad:
    *bad_index = count;
    free(v);
    return false;
}

char *cli_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (n + 1 < cap) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!buf) return NULL;
    if (err) { free(buf); errno = EIO; return NULL; }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

void cli_ignore_sigpipe(void)
{
    signal(SIGPIPE, SIG_IGN);
}

void cli_warn_train_ctx(const char *cmd, const struct tern_model *m, long long n_ctx,
                        long long n_need)
{
    const struct tern_model_info *in = tern_model_get_info(m);
    long long train = in->n_ctx_train;
    if (n_ctx <= train && n_need <= train) return;
    /* the loader assumes 2048 when the key is absent: say so rather than cite a missing key */
    char key[96];
    snprintf(key, sizeof key, "%s.context_length", in->arch_name);
    bool stated = tern_gguf_find_key(tern_model_gguf(m), key) >= 0;
    if (n_need > train)
        fprintf(stderr, "tern %s: warning: prompt + generated tokens (up to %lld) exceed the model's "
                "training context of %lld tokens (%s%s); text past position %lld is usually "
                "degraded\n", cmd, n_need, train, key, stated ? "" : " absent, assumed", train);
    else
        fprintf(stderr, "tern %s: warning: the context size -c %lld exceeds the model's training "
                "context of %lld tokens (%s%s); text past position %lld is usually degraded\n",
                cmd, n_ctx, train, key, stated ? "" : " absent, assumed", train);
}

long cli_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) sscanf(line + 6, "%ld", &kb);
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

struct cli_gen_opts cli_gen_opts_default(long long n_predict)
{
    struct cli_gen_opts o = {.n_predict = n_predict, .cache_mb = 256};
    o.sampler = tern_sampler_default_params();
    return o;
}

/* The generating commands' options. The bounds are what the library accepts (sampler,
 * context) or what can be allocated sensibly; the parser prints them when a value falls outside. */
#define O struct cli_gen_opts
const struct cli_option cli_gen_table[] = {
    {"-n", "--n-predict", CLI_INT, "N", CLI_AT(O, n_predict), CLI_RANGE(0, CLI_MAX_N_PREDICT),
     .group = "Context, threads and sampling", .help = "tokens to generate"},
    {"-c", "--ctx-size", CLI_INT, "N", CLI_AT(O, n_ctx), CLI_RANGE(1, CLI_MAX_N_CTX), .help = "context size"},
    {NULL, "--swa-full", CLI_FLAG, NULL, CLI_AT(O, swa_full),
     .help = "sliding-window layers (gemma3/4, phi3) keep every position, not only their window "
             "(more memory; rollback to any position)"},
    {"-t", "--threads", CLI_INT, "N", CLI_AT(O, threads), CLI_RANGE(1, 512), .def = "all CPUs", .help = "threads"},
    {NULL, "--temp", CLI_DOUBLE, "T", CLI_AT(O, sampler.temperature), CLI_FRANGE(0, 100),
     .def = "0 = greedy", .help = "temperature"},
    {NULL, "--top-k", CLI_INT, "K", CLI_AT(O, sampler.top_k), CLI_RANGE(0, 1 << 24), .def = "0 = off",
     .help = "sample from the K most likely tokens"},
    {NULL, "--top-p", CLI_DOUBLE, "P", CLI_AT(O, sampler.top_p), CLI_FRANGE(0, 1),
     .def = "1 = off", .help = "sample from the most likely tokens whose probabilities add up to P"},
    {NULL, "--min-p", CLI_DOUBLE, "P", CLI_AT(O, sampler.min_p), CLI_FRANGE(0, 1),
     .def = "0 = off", .help = "drop tokens less likely than P times the most likely one"},
    {NULL, "--repeat-penalty", CLI_DOUBLE, "R", CLI_AT(O, sampler.repeat_penalty), CLI_FRANGE(0, 100),
     .def = "1 = off", .help = "divide the logits of tokens among the last --repeat-last-n by R"},
    {NULL, "--repeat-last-n", CLI_INT, "N", CLI_AT(O, sampler.repeat_last_n), CLI_RANGE(1, 1 << 20),
     .def = "64", .help = "how many of the last tokens the repeat penalty looks at"},
    {"-s", "--seed", CLI_INT, "S", CLI_AT(O, sampler.seed), CLI_RANGE(0, INT64_MAX), .help = "RNG seed"},
    {NULL, "--prompt-cache", CLI_PATH, "DIR", CLI_AT(O, cache_dir),
     .help = "reuse the KV of cached prompt prefixes (saved in DIR)"},
    {NULL, "--cache-mb", CLI_INT, "N", CLI_AT(O, cache_mb), CLI_RANGE(1, 1 << 22),
     .help = "prompt cache memory budget in MiB"},
    {.kind = CLI_INCLUDE, .sub = cli_lora_table, CLI_AT(O, lora)},
    {0},
};
#undef O

double cli_clock_ms(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int cli_check_template_vars(const char *cmd, const char *text)
{
    struct tern_chat_params p = tern_chat_default_params();
    p.messages_json = "[]";
    p.extra_vars_json = text;
    if (tern_chat_validate(&p) == TERN_OK) return CLI_EXIT_OK;
    /* the library names the document "extra_vars"; the user wrote a flag */
    const char *msg = tern_last_error();
    if (!strncmp(msg, "extra_vars: ", 12)) msg += 12;
    return cli_usage_error(cmd, "--template-vars: %s", msg);
}
